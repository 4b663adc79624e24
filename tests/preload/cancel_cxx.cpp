// C++ destructors run when a thread is cancelled or calls pthread_exit from
// nested frames (forced unwinding), interleaved correctly with C cleanup
// handlers; catch(...) must rethrow the forced unwind.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <string>
#include "common.h"

static std::string trail;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void add(const char* s) {
  pthread_mutex_lock(&lock);
  trail += s;
  pthread_mutex_unlock(&lock);
}

struct Guard {
  const char* name;
  explicit Guard(const char* n) : name(n) {}
  ~Guard() { add(name); }
};

static void cleanup(void* arg) { add((const char*)arg); }

static void level3(bool do_exit) {
  Guard g("3");
  if (do_exit) pthread_exit((void*)77);
  for (;;) pthread_testcancel();
}

static void level2(bool do_exit) {
  Guard g("2");
  pthread_cleanup_push(cleanup, (void*)"c");
  level3(do_exit);
  pthread_cleanup_pop(0);
}

static volatile int started;
static void* worker(void* arg) {
  bool do_exit = arg != nullptr;
  Guard g("1");
  started = 1;
  try {
    level2(do_exit);
  } catch (...) {
    add("x");
    throw;  // the forced unwind must go on
  }
  return nullptr;
}

int main() {
  pthread_t t;
  CHECK_EQ(pthread_create(&t, nullptr, worker, nullptr), 0);
  while (!started) sched_yield();
  CHECK_EQ(pthread_cancel(t), 0);
  void* r;
  CHECK_EQ(pthread_join(t, &r), 0);
  CHECK(r == PTHREAD_CANCELED, "cancel result %p", r);
  CHECK(trail == "3c2x1", "cancel trail %s", trail.c_str());
  trail.clear();
  started = 0;
  CHECK_EQ(pthread_create(&t, nullptr, worker, (void*)1), 0);
  CHECK_EQ(pthread_join(t, &r), 0);
  CHECK((long)r == 77, "exit result %p", r);
  CHECK(trail == "3c2x1", "exit trail %s", trail.c_str());
  printf("destructors and cleanup handlers ran in order on cancel and pthread_exit\n");
  return 0;
}
