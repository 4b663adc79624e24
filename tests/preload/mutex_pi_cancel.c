/* Asynchronous cancellation of threads blocked on a PTHREAD_PRIO_INHERIT
 * mutex (their wait ends, as for any mutex under asynchronous
 * cancellation), then the same mutex goes on being used: other threads
 * reuse the dead threads' stack memory, wait on it, and a SCHED_FIFO
 * thread (when permitted) waits too, which makes a priority-inheritance
 * implementation look at every waiter it knows of. A runtime that kept a
 * cancelled waiter's record (it lived in a frame the cancellation unwound)
 * reads garbage then: it crashes or hangs. ROUNDS rounds. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

#define ROUNDS 100
#define NCANCEL 4

/* PI_PSHARED (mutex_pi_cancel_pshared.c): a process-shared mutex. */
#ifndef PI_PSHARED
#define PI_PSHARED 0
#endif

static pthread_mutex_t mstore, *m = &mstore;
static atomic_int started;

static void *cancelled(void *arg) {
  (void)arg;
  CHECK_EQ(pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL), 0);
  atomic_fetch_add(&started, 1);
  pthread_mutex_lock(m); /* held by main until they are cancelled */
  return NULL;
}

static void *filler(void *arg) {
  (void)arg;
  char big[64 * 1024];
  memset(big, 0x5a, sizeof big);
  __asm__ volatile("" : : "r"(big) : "memory");
  CHECK_EQ(pthread_mutex_lock(m), 0);
  CHECK_EQ(pthread_mutex_unlock(m), 0);
  return NULL;
}

static void *rt_waiter(void *arg) {
  (void)arg;
  CHECK_EQ(pthread_mutex_lock(m), 0);
  CHECK_EQ(pthread_mutex_unlock(m), 0);
  return NULL;
}

int main(void) {
  pthread_mutexattr_t at;
  CHECK_EQ(pthread_mutexattr_init(&at), 0);
  CHECK_EQ(pthread_mutexattr_setprotocol(&at, PTHREAD_PRIO_INHERIT), 0);
#if PI_PSHARED
  CHECK_EQ(pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED), 0);
  void *mem = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(mem != MAP_FAILED, "mmap failed");
  m = (pthread_mutex_t *)mem;
#endif
  CHECK_EQ(pthread_mutex_init(m, &at), 0);
  int rt_runs = 0;
  for (int round = 0; round < ROUNDS; round++) {
    CHECK_EQ(pthread_mutex_lock(m), 0);
    pthread_t th[NCANCEL];
    atomic_store(&started, 0);
    for (int i = 0; i < NCANCEL; i++) CHECK_EQ(pthread_create(&th[i], NULL, cancelled, NULL), 0);
    while (atomic_load(&started) < NCANCEL) usleep(100);
    usleep(500); /* most of them blocked in the lock by now (either way is a valid run) */
    for (int i = 0; i < NCANCEL; i++) CHECK_EQ(pthread_cancel(th[i]), 0);
    for (int i = 0; i < NCANCEL; i++) {
      void *r;
      CHECK_EQ(pthread_join(th[i], &r), 0);
      CHECK(r == PTHREAD_CANCELED, "round %d: thread %d returned %p", round, i, r);
    }
    pthread_t f[NCANCEL];
    for (int i = 0; i < NCANCEL; i++) CHECK_EQ(pthread_create(&f[i], NULL, filler, NULL), 0);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(&a, SCHED_FIFO);
    struct sched_param sp = {.sched_priority = 5};
    pthread_attr_setschedparam(&a, &sp);
    pthread_t r;
    int e = pthread_create(&r, &a, rt_waiter, NULL); /* EPERM without the privilege */
    pthread_attr_destroy(&a);
    usleep(500);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    for (int i = 0; i < NCANCEL; i++) CHECK_EQ(pthread_join(f[i], NULL), 0);
    if (e == 0) {
      CHECK_EQ(pthread_join(r, NULL), 0);
      rt_runs++;
    }
  }
  printf("%d rounds of %d cancelled waiters\n", ROUNDS, NCANCEL);
  return rt_runs >= 0 ? 0 : 1;
}
