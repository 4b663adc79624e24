/* Robust mutexes: when the owner thread ends while holding one, the next
 * locker gets EOWNERDEAD (also a locker already blocked on it), may repair
 * it with pthread_mutex_consistent, and otherwise the mutex becomes
 * ENOTRECOVERABLE for everybody. Owner death by return, by pthread_exit,
 * for recursive and errorcheck kinds, with several mutexes held at once,
 * and for an owner that is a kernel thread goshim did not create (created
 * from a constructor, before goshim starts): the kernel reports that one. */
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static pthread_mutex_t m[4];

static void init_robust(pthread_mutex_t *mu, int type) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutexattr_settype(&a, type);
  CHECK_EQ(pthread_mutex_init(mu, &a), 0);
  pthread_mutexattr_destroy(&a);
}

static void *hold_and_return(void *arg) {
  long n = (long)arg;
  for (long i = 0; i < n; i++) CHECK_EQ(pthread_mutex_lock(&m[i]), 0);
  return NULL; /* dies holding them */
}

static void *hold_and_exit(void *arg) {
  CHECK_EQ(pthread_mutex_lock(&m[0]), 0);
  pthread_exit(arg);
}

static volatile int holder_has_it, locker_tid, locker_done;
static void *hold_until_told(void *arg) {
  CHECK_EQ(pthread_mutex_lock(&m[0]), 0);
  __atomic_store_n(&holder_has_it, 1, __ATOMIC_RELEASE);
  /* The locker sleeps in pthread_mutex_lock. */
  wait_flag(&locker_tid);
  wait_tid_asleep(locker_tid, &locker_done);
  return arg; /* dies while the other thread is blocked in pthread_mutex_lock */
}

static int blocked_result = -1;
static void *blocked_locker(void *arg) {
  __atomic_store_n(&locker_tid, self_tid(), __ATOMIC_RELEASE);
  blocked_result = pthread_mutex_lock(&m[0]);
  __atomic_store_n(&locker_done, 1, __ATOMIC_RELEASE);
  if (blocked_result == EOWNERDEAD) {
    CHECK_EQ(pthread_mutex_consistent(&m[0]), 0);
    CHECK_EQ(pthread_mutex_unlock(&m[0]), 0);
  }
  return arg;
}

/* A kernel thread started by a constructor: before goshim initializes. */
static pthread_t early;
static volatile int early_locked;
static int early_go[2]; /* main writes a byte when the early thread may go on */
static void *early_main(void *arg) {
  char c;
  CHECK_EQ(read(early_go[0], &c, 1), 1);
  CHECK_EQ(pthread_mutex_lock(&m[3]), 0);
  __atomic_store_n(&early_locked, 1, __ATOMIC_RELEASE);
  return arg; /* the kernel walks this thread's robust list when it ends */
}
__attribute__((constructor)) static void start_early(void) {
  init_robust(&m[3], PTHREAD_MUTEX_NORMAL);
  CHECK_EQ(pipe(early_go), 0);
  pthread_create(&early, NULL, early_main, NULL);
}

int main(void) {
  pthread_t t;
  for (int i = 0; i < 3; i++) init_robust(&m[i], PTHREAD_MUTEX_NORMAL);

  /* 1. owner returns holding three mutexes */
  pthread_create(&t, NULL, hold_and_return, (void *)3L);
  pthread_join(t, NULL);
  for (int i = 0; i < 3; i++) {
    CHECK_EQ(pthread_mutex_lock(&m[i]), EOWNERDEAD);
    CHECK_EQ(pthread_mutex_consistent(&m[i]), 0);
    CHECK_EQ(pthread_mutex_consistent(&m[i]), EINVAL); /* consistent already */
    CHECK_EQ(pthread_mutex_unlock(&m[i]), 0);
    CHECK_EQ(pthread_mutex_lock(&m[i]), 0);
    CHECK_EQ(pthread_mutex_unlock(&m[i]), 0);
  }
  printf("owner death at return: EOWNERDEAD, consistent, usable again\n");

  /* 2. owner calls pthread_exit; the next owner does not repair it */
  pthread_create(&t, NULL, hold_and_exit, NULL);
  pthread_join(t, NULL);
  CHECK_EQ(pthread_mutex_trylock(&m[0]), EOWNERDEAD);
  CHECK_EQ(pthread_mutex_unlock(&m[0]), 0);
  CHECK_EQ(pthread_mutex_lock(&m[0]), ENOTRECOVERABLE);
  CHECK_EQ(pthread_mutex_trylock(&m[0]), ENOTRECOVERABLE);
  CHECK_EQ(pthread_mutex_destroy(&m[0]), 0);
  printf("owner death at pthread_exit, not repaired: ENOTRECOVERABLE\n");

  /* 3. a locker blocked while the owner dies */
  init_robust(&m[0], PTHREAD_MUTEX_NORMAL);
  pthread_t b;
  holder_has_it = 0;
  pthread_create(&t, NULL, hold_until_told, NULL);
  while (!__atomic_load_n(&holder_has_it, __ATOMIC_ACQUIRE)) sched_yield();
  pthread_create(&b, NULL, blocked_locker, NULL);
  pthread_join(t, NULL);
  pthread_join(b, NULL);
  CHECK_EQ(blocked_result, EOWNERDEAD);
  CHECK_EQ(pthread_mutex_lock(&m[0]), 0);
  CHECK_EQ(pthread_mutex_unlock(&m[0]), 0);
  printf("blocked locker woken by the owner's death: EOWNERDEAD\n");

  /* 4. recursive and errorcheck kinds */
  init_robust(&m[1], PTHREAD_MUTEX_RECURSIVE);
  init_robust(&m[2], PTHREAD_MUTEX_ERRORCHECK);
  CHECK_EQ(pthread_mutex_lock(&m[1]), 0);
  CHECK_EQ(pthread_mutex_lock(&m[1]), 0);
  CHECK_EQ(pthread_mutex_unlock(&m[1]), 0);
  CHECK_EQ(pthread_mutex_unlock(&m[1]), 0);
  CHECK_EQ(pthread_mutex_lock(&m[2]), 0);
  CHECK_EQ(pthread_mutex_lock(&m[2]), EDEADLK);
  CHECK_EQ(pthread_mutex_unlock(&m[2]), 0);
  CHECK_EQ(pthread_mutex_unlock(&m[2]), EPERM);
  pthread_create(&t, NULL, hold_and_return, (void *)3L); /* m[0..2] */
  pthread_join(t, NULL);
  CHECK_EQ(pthread_mutex_lock(&m[1]), EOWNERDEAD);
  CHECK_EQ(pthread_mutex_lock(&m[1]), 0); /* recursion on an inconsistent mutex */
  CHECK_EQ(pthread_mutex_unlock(&m[1]), ENOTRECOVERABLE); /* still held once */
  CHECK_EQ(pthread_mutex_unlock(&m[1]), 0);
  CHECK_EQ(pthread_mutex_lock(&m[1]), ENOTRECOVERABLE);
  CHECK_EQ(pthread_mutex_lock(&m[2]), EOWNERDEAD);
  CHECK_EQ(pthread_mutex_lock(&m[2]), EDEADLK);
  CHECK_EQ(pthread_mutex_consistent(&m[2]), 0);
  CHECK_EQ(pthread_mutex_unlock(&m[2]), 0);
  CHECK_EQ(pthread_mutex_lock(&m[0]), EOWNERDEAD);
  CHECK_EQ(pthread_mutex_consistent(&m[0]), 0);
  CHECK_EQ(pthread_mutex_unlock(&m[0]), 0);
  printf("recursive and errorcheck robust mutexes\n");

  /* 5. the owner is a kernel thread created before goshim started */
  CHECK_EQ(write(early_go[1], "g", 1), 1);
  wait_flag(&early_locked);
  CHECK_EQ(pthread_mutex_lock(&m[3]), EOWNERDEAD); /* blocks until it dies */
  CHECK_EQ(pthread_mutex_consistent(&m[3]), 0);
  CHECK_EQ(pthread_mutex_unlock(&m[3]), 0);
  pthread_join(early, NULL);
  printf("owner death of a thread started before main: EOWNERDEAD\n");
  return 0;
}
