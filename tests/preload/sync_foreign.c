/* Synchronization objects shared between goroutines and a kernel thread
 * that goshim did not create (started from a constructor, before goshim
 * initializes; under goshim it stays a plain kernel thread): a mutex and
 * condition variable ping-pong, a counting semaphore, a rwlock, a barrier
 * and raw syscall(SYS_futex) hand-offs, in both directions, many times.
 * Mutual exclusion is checked with a counter only updated under the lock. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"

#define ROUNDS 3000

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn; /* 0: foreign thread's turn, 1: goroutines' */
static long in_mu, in_rw, hits, rw_hits;
static sem_t ping, pong;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t bar;
static int fword; /* futex word: whose turn (0 foreign, 1 goroutine) */
static int started[2]; /* main writes a byte here once it runs */

static void futex_wait_for(int *w, int want) {
  int v;
  while ((v = __atomic_load_n(w, __ATOMIC_ACQUIRE)) != want)
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
static void futex_set(int *w, int v) {
  __atomic_store_n(w, v, __ATOMIC_RELEASE);
  syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void locked_work(long *inside, long *count) {
  CHECK_EQ(__atomic_add_fetch(inside, 1, __ATOMIC_SEQ_CST), 1);
  (*count)++;
  __atomic_sub_fetch(inside, 1, __ATOMIC_SEQ_CST);
}

static void play(int me) {
  for (int i = 0; i < ROUNDS; i++) {
    /* mutex + condvar turns */
    pthread_mutex_lock(&mu);
    while (turn != me) pthread_cond_wait(&cv, &mu);
    locked_work(&in_mu, &hits);
    turn = !me;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    /* semaphores */
    if (me == 0) {
      CHECK_EQ(sem_post(&ping), 0);
      while (sem_wait(&pong) != 0) CHECK_EQ(errno, EINTR);
    } else {
      while (sem_wait(&ping) != 0) CHECK_EQ(errno, EINTR);
      CHECK_EQ(sem_post(&pong), 0);
    }
    /* rwlock: both write */
    pthread_rwlock_wrlock(&rw);
    locked_work(&in_rw, &rw_hits);
    pthread_rwlock_unlock(&rw);
    /* futex turns */
    futex_wait_for(&fword, me);
    futex_set(&fword, !me);
    if (i % 100 == 0) pthread_barrier_wait(&bar);
  }
}

static pthread_t foreign;
static void *foreign_main(void *arg) {
  char c;
  CHECK_EQ(read(started[0], &c, 1), 1);
  play(0);
  return arg;
}

__attribute__((constructor)) static void early(void) {
  sem_init(&ping, 0, 0);
  sem_init(&pong, 0, 0);
  pthread_barrier_init(&bar, NULL, 2);
  CHECK_EQ(pipe(started), 0);
  pthread_create(&foreign, NULL, foreign_main, NULL);
}

/* The goroutine side runs in a created thread, while main keeps another
 * goroutine busy contending on the same mutex. */
static volatile int done;
static void *contender(void *arg) {
  long n = 0;
  while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&mu);
    locked_work(&in_mu, &hits);
    pthread_mutex_unlock(&mu);
    if (++n % 16 == 0) sched_yield();
  }
  return (void *)n;
}

static void *goroutine_main(void *arg) {
  play(1);
  return arg;
}

int main(void) {
  pthread_t g, c;
  pthread_create(&c, NULL, contender, NULL);
  pthread_create(&g, NULL, goroutine_main, NULL);
  CHECK_EQ(write(started[1], "s", 1), 1);
  pthread_join(g, NULL);
  pthread_join(foreign, NULL);
  __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
  void *n;
  pthread_join(c, &n);
  CHECK_EQ(hits, 2L * ROUNDS + (long)n);
  CHECK_EQ(rw_hits, 2L * ROUNDS);
  printf("%d rounds of mutex/cond, semaphore, rwlock and futex hand-offs with a foreign thread\n",
         ROUNDS);
  return 0;
}
