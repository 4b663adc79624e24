/* errno and __thread stay per thread while threads yield (and so migrate
 * between kernel threads under M:N). errno_loop lets gcc keep
 * __errno_location() in a register across the yields (the function is
 * declared const): that cached address must stay this thread's errno.
 * tls_migrate.check.sh verifies that gcc did cache it. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"

#define THREADS 16
/* Natively each sched_yield gives the CPU to whatever else is runnable, so
 * the native run's time grows with the machine's load (20,000 yields a
 * thread: 6.5 s under stress-ng, over the 120 s timeout under heavier
 * load); under goshim a yield is a switch, and a few thousand per thread
 * still move threads between kernel threads tens to thousands of times at
 * GOSHIM_MAXPROCS=2 (21-4,221 in 12 runs with 4,000). */
#define ITERS 8000

static __thread long counter;
static __thread int tag;
static long migrations[THREADS];

__attribute__((noinline)) long errno_loop(int id) {
  long bad = 0;
  long tid = syscall(SYS_gettid), moves = 0;
  for (int i = 0; i < ITERS; i++) {
    errno = id * 100000 + i;
    counter++;
    sched_yield();
    if (errno != id * 100000 + i) bad++;
    if (counter != i + 1 || tag != id) bad++;
    long now = syscall(SYS_gettid);
    if (now != tid) moves++, tid = now;
  }
  migrations[id] = moves;
  return bad;
}

static void *worker(void *arg) {
  int id = (int)(long)arg;
  tag = id;
  return (void *)errno_loop(id);
}

int main(void) {
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++) CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)i), 0);
  long bad = 0, moves = 0;
  for (int i = 0; i < THREADS; i++) {
    void *r;
    CHECK_EQ(pthread_join(t[i], &r), 0);
    bad += (long)r;
    moves += migrations[i];
  }
  CHECK(bad == 0, "%ld wrong errno/__thread reads", bad);
  if (getenv("REQUIRE_MIGRATION")) CHECK(moves > 0, "no thread ever changed kernel thread");
  fprintf(stderr, "kernel-thread changes observed: %ld\n", moves);
  printf("errno and __thread correct in %d threads x %d yields\n", THREADS, ITERS);
  return 0;
}
