/* A thread that locks and unlocks a mutex in a tight loop (the hog) must
 * not keep the other threads out of it for ever: a thread created by main
 * and a kernel thread started from a constructor (before any preloaded
 * runtime initializes: it stays a plain kernel thread) each take the mutex
 * ROUNDS times while the hog runs (it has taken the mutex once before
 * they start). Each round starts with a sched_yield,
 * so the hog is back in its loop; the hog's only code outside the lock is
 * its loop test and the lock calls. (Under an M:N runtime at one
 * processor, the thread runs only when the hog is preempted, nearly always
 * holding the mutex: without a hand-over to a waiter that waited long
 * enough, it fails round after round.)
 *
 * Phases: a normal mutex with pthread_mutex_lock, then an error-checking
 * mutex with pthread_mutex_timedlock (a far deadline) whose unlocks must
 * succeed (the owner is recorded right), each against the thread, then
 * against the kernel thread. Mutual exclusion is checked with a counter
 * updated only under the lock. Progress is asserted by counts only: a
 * contender that never gets the mutex makes the run hang (the case's
 * timeout). */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <time.h>
#include "common.h"

#define ROUNDS 20

static pthread_mutex_t mu_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mu_check = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;

static pthread_mutex_t *cur;    /* the mutex of the phase */
static int timed;               /* contenders use pthread_mutex_timedlock */
static long hog_rounds;         /* atomic; written under the lock */
static long others;             /* contender rounds, under the lock */
static long inside;             /* holders right now: must be 1 inside */
static int stop;                /* atomic: the hog leaves */
static volatile unsigned sink;

static void enter(void) { CHECK_EQ(__atomic_add_fetch(&inside, 1, __ATOMIC_SEQ_CST), 1); }
static void leave(void) { __atomic_sub_fetch(&inside, 1, __ATOMIC_SEQ_CST); }

static void *hog(void *arg) {
  pthread_mutex_t *m = cur;
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    CHECK_EQ(pthread_mutex_lock(m), 0);
    enter();
    unsigned x = sink;
    for (int k = 0; k < 1000; k++) x = x * 1103515245u + 12345u;
    sink = x;
    __atomic_add_fetch(&hog_rounds, 1, __ATOMIC_RELEASE);
    leave();
    CHECK_EQ(pthread_mutex_unlock(m), 0);
  }
  return arg;
}

/* ROUNDS acquisitions beside the running hog. */
static void contend(void) {
  struct timespec far;
  clock_gettime(CLOCK_REALTIME, &far);
  far.tv_sec += 3600;
  while (__atomic_load_n(&hog_rounds, __ATOMIC_ACQUIRE) == 0) sched_yield();  /* the hog runs */
  for (int i = 0; i < ROUNDS; i++) {
    sched_yield();
    CHECK_EQ(timed ? pthread_mutex_timedlock(cur, &far) : pthread_mutex_lock(cur), 0);
    enter();
    others++;
    leave();
    CHECK_EQ(pthread_mutex_unlock(cur), 0);
  }
}

static pthread_t foreign;
static sem_t foreign_go, foreign_done;

static void *foreign_main(void *arg) {
  for (int phase = 0; phase < 2; phase++) {
    while (sem_wait(&foreign_go) != 0) CHECK_EQ(errno, EINTR);
    contend();
    CHECK_EQ(sem_post(&foreign_done), 0);
  }
  return arg;
}

__attribute__((constructor)) static void early(void) {
  sem_init(&foreign_go, 0, 0);
  sem_init(&foreign_done, 0, 0);
  pthread_create(&foreign, NULL, foreign_main, NULL);
}

static void *thread_main(void *arg) {
  contend();
  return arg;
}

/* One contest: the hog against a new thread, or against the kernel thread. */
static void run(pthread_mutex_t *m, int use_timed, int use_foreign, const char *what) {
  cur = m;
  timed = use_timed;
  hog_rounds = 0;
  others = 0;
  __atomic_store_n(&stop, 0, __ATOMIC_RELEASE);
  pthread_t h, t;
  CHECK_EQ(pthread_create(&h, NULL, hog, NULL), 0);
  if (use_foreign) {
    CHECK_EQ(sem_post(&foreign_go), 0);
    while (sem_wait(&foreign_done) != 0) CHECK_EQ(errno, EINTR);
  } else {
    CHECK_EQ(pthread_create(&t, NULL, thread_main, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  CHECK_EQ(pthread_join(h, NULL), 0);
  CHECK_EQ(others, ROUNDS);
  CHECK(hog_rounds > 0, "the hog ran %ld rounds", hog_rounds);
  CHECK_EQ(pthread_mutex_trylock(m), 0);  /* left unlocked, no owner */
  CHECK_EQ(pthread_mutex_unlock(m), 0);
  printf("%s: %d rounds beside the hog\n", what, ROUNDS);
}

int main(void) {
  run(&mu_normal, 0, 0, "normal mutex, thread");
  run(&mu_normal, 0, 1, "normal mutex, kernel thread");
  run(&mu_check, 1, 0, "errorcheck mutex, timedlock, thread");
  run(&mu_check, 1, 1, "errorcheck mutex, timedlock, kernel thread");
  CHECK_EQ(pthread_join(foreign, NULL), 0);
  return 0;
}
