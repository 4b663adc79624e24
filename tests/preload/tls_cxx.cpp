// C++ thread_local objects with destructors, and exceptions, in threads
// that yield (and migrate) between construction, use and destruction.
// Each thread also counts how often its kernel thread (gettid) changed:
// with REQUIRE_MIGRATION set (the runner sets it under goshim with 2 or
// more processors) at least one change must have been seen, so the
// thread_local checks ran across migrations (the threads yield on, checking,
// until one is seen: at most 20 s).
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>
#include "common.h"

static std::atomic<int> constructed{0}, destroyed{0};

struct Tracker {
  int id = -1;
  std::string text;
  Tracker() { constructed++; }
  ~Tracker() {
    if (id >= 0 && text != "thread " + std::to_string(id)) std::abort();
    destroyed++;
  }
};

static thread_local Tracker tracker;
static std::atomic<long> moves{0};
static bool require_migration;

static void* worker(void* arg) {
  int id = (int)(long)arg;
  tracker.id = id;
  tracker.text = "thread " + std::to_string(id);
  Tracker* const mine = &tracker;
  long caught = 0, tid = syscall(SYS_gettid);
  for (int i = 0; i < 200; i++) {
    sched_yield();
    long now = syscall(SYS_gettid);
    if (now != tid) moves++, tid = now;
    try {
      if (i % 3 == 0) throw std::runtime_error("x" + std::to_string(i));
    } catch (const std::runtime_error& e) {
      sched_yield();
      if (e.what() == "x" + std::to_string(i)) caught++;
    }
    CHECK(tracker.id == id, "thread_local changed: %d != %d", tracker.id, id);
    CHECK(&tracker == mine, "thread_local moved: %p != %p", (void*)&tracker, (void*)mine);
  }
  // Where a migration is required, the threads go on yielding (and
  // checking) until one has been seen: a loaded machine may run every
  // thread of the 200 rounds on one kernel thread. At most 20 s.
  if (require_migration) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
      sched_yield();
      long now = syscall(SYS_gettid);
      if (now != tid) moves++, tid = now;
      CHECK(tracker.id == id, "thread_local changed: %d != %d", tracker.id, id);
      CHECK(&tracker == mine, "thread_local moved: %p != %p", (void*)&tracker, (void*)mine);
      clock_gettime(CLOCK_MONOTONIC, &t1);
    } while (moves.load() == 0 && t1.tv_sec - t0.tv_sec < 20);
  }
  return (void*)caught;
}

int main() {
  const int n = 64;
  require_migration = getenv("REQUIRE_MIGRATION") != nullptr;
  pthread_t t[n];
  for (long i = 0; i < n; i++) CHECK_EQ(pthread_create(&t[i], nullptr, worker, (void*)i), 0);
  long caught = 0;
  for (int i = 0; i < n; i++) {
    void* r;
    CHECK_EQ(pthread_join(t[i], &r), 0);
    caught += (long)r;
  }
  CHECK_EQ(caught, (long)n * 67);
  CHECK_EQ(constructed.load(), n);
  CHECK_EQ(destroyed.load(), n);
  if (require_migration) CHECK(moves.load() > 0, "no thread ever changed kernel thread");
  fprintf(stderr, "kernel-thread changes observed: %ld\n", moves.load());
  printf("thread_local constructed and destroyed %d times, %ld exceptions caught\n", n, caught);
  return 0;
}
