/* 100,000 threads parked at once, in three ways: on one condition variable
 * (woken by one broadcast, which requeues them onto the mutex), on 100,000
 * distinct futex words (syscall(SYS_futex), each woken on its own), and on
 * one semaphore (woken by as many posts). Every thread must come back
 * exactly once, and the process must stay within GOSHIM_MAXPROCS + 4
 * kernel threads. NTHREADS sets the count: natively the runner uses 3,000
 * (100,000 kernel threads exhaust the machine). */
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"

static int nthreads;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go, waiting, woken;
static int *words;
static int parked;
static sem_t sem;

static void *worker(void *arg) {
  long i = (long)arg;
  /* 1: condition variable */
  pthread_mutex_lock(&mu);
  waiting++;
  while (!go) pthread_cond_wait(&cv, &mu);
  woken++;
  pthread_mutex_unlock(&mu);
  /* 2: a futex word of its own */
  __atomic_add_fetch(&parked, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&words[i], __ATOMIC_ACQUIRE) == 0)
    syscall(SYS_futex, &words[i], FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
  /* 3: a semaphore */
  __atomic_sub_fetch(&parked, 1, __ATOMIC_SEQ_CST);
  CHECK_EQ(sem_wait(&sem), 0);
  return NULL;
}

int main(void) {
  nthreads = env_int("NTHREADS", 100000);
  words = calloc(nthreads, sizeof(int));
  sem_init(&sem, 0, 0);
  pthread_t *t = malloc(sizeof(pthread_t) * nthreads);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 16 * 1024);
  for (long i = 0; i < nthreads; i++) CHECK_EQ(pthread_create(&t[i], &a, worker, (void *)i), 0);
  for (;;) {
    pthread_mutex_lock(&mu);
    int w = waiting;
    pthread_mutex_unlock(&mu);
    if (w == nthreads) break;
    sched_yield();
  }
  check_kernel_threads("all threads waiting on the condition variable");
  pthread_mutex_lock(&mu);
  go = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  while (__atomic_load_n(&parked, __ATOMIC_SEQ_CST) < nthreads) sched_yield();
  for (int k = 0; k < 100; k++) sched_yield(); /* let the last ones block */
  check_kernel_threads("all threads waiting on their own futex word");
  pthread_mutex_lock(&mu);
  CHECK_EQ(woken, nthreads);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < nthreads; i++) {
    __atomic_store_n(&words[i], 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &words[i], FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  }
  while (__atomic_load_n(&parked, __ATOMIC_SEQ_CST) > 0) sched_yield();
  for (int i = 0; i < nthreads; i++) CHECK_EQ(sem_post(&sem), 0);
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  int v;
  sem_getvalue(&sem, &v);
  CHECK_EQ(v, 0);
  printf("%d threads parked on a condvar, on their own futex words, on a semaphore\n", nthreads);
  return 0;
}
