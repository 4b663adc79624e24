/* Signals and cancellation in the synchronization waits, as glibc and the
 * kernel behave: a handler without SA_RESTART interrupts sem_wait,
 * sem_timedwait and futex waits (EINTR); with SA_RESTART the untimed ones
 * go on and the timed ones still fail with EINTR; condition variable and
 * mutex waits never fail with EINTR. sem_wait and pthread_cond_timedwait
 * are cancellation points (the cleanup handler of a condvar wait runs with
 * the mutex held). Output must be identical natively and under goshim.
 * No sleep decides the output. The waiter publishes its kernel thread id
 * just before its wait (ready_to_wait) and the first signal or the cancel
 * is sent once that thread sleeps (state S in /proc/self/task/TID/stat:
 * natively inside the wait). A wait that must fail with EINTR is signalled
 * until it returns (under an M:N runtime a signal may still land before
 * the wait: it then only runs the handler early); a wait that must go on
 * gets five signals, each once the handler of the one before has run and
 * the waiter sleeps again, and must still be waiting after the last. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static volatile int handled;
static void on_usr1(int sig) { handled++; }

static sem_t sem;
static int fword;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag;
static volatile int ready_to_wait, returned; /* the waiter's tid; its wait returned */
static long result;
static int result_errno;

enum { SEM_WAIT, SEM_TIMEDWAIT, FUTEX_UNTIMED, FUTEX_TIMED, COND_WAIT, MUTEX_LOCK };
static const char *names[] = {"sem_wait", "sem_timedwait", "futex wait", "futex wait (timeout)",
                              "pthread_cond_wait", "pthread_mutex_lock"};

static void *waiter(void *arg) {
  int what = (int)(long)arg;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 30;
  struct timespec rel = {30, 0};
  errno = 0;
  ready_to_wait = self_tid();
  switch (what) {
    case SEM_WAIT: result = sem_wait(&sem); break;
    case SEM_TIMEDWAIT: result = sem_timedwait(&sem, &ts); break;
    case FUTEX_UNTIMED: result = syscall(SYS_futex, &fword, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0); break;
    case FUTEX_TIMED: result = syscall(SYS_futex, &fword, FUTEX_WAIT_PRIVATE, 0, &rel, NULL, 0); break;
    case COND_WAIT:
      pthread_mutex_lock(&mu);
      while (!flag) result = pthread_cond_wait(&cv, &mu);
      pthread_mutex_unlock(&mu);
      break;
    case MUTEX_LOCK:
      result = pthread_mutex_lock(&mu);
      pthread_mutex_unlock(&mu);
      break;
  }
  result_errno = errno;
  __atomic_store_n(&returned, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* Returns once the waiter sleeps (in its wait), or its wait returned. */
static void wait_waiter_asleep(void) {
  while (!ready_to_wait) sched_yield();
  wait_tid_asleep(ready_to_wait, &returned);
}

static void run(int what, int restart) {
  struct sigaction sa = {0};
  sa.sa_handler = on_usr1;
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigaction(SIGUSR1, &sa, NULL);
  sem_init(&sem, 0, 0);
  fword = 0;
  flag = 0;
  handled = 0;
  ready_to_wait = 0;
  returned = 0;
  result = -2;
  if (what == MUTEX_LOCK) pthread_mutex_lock(&mu);
  pthread_t t;
  pthread_create(&t, NULL, waiter, (void *)(long)what);
  wait_waiter_asleep();
  int timed = what == SEM_TIMEDWAIT || what == FUTEX_TIMED;
  int sem_or_futex = what != COND_WAIT && what != MUTEX_LOCK;
  if (sem_or_futex && (!restart || timed)) {
    /* must end with EINTR: signal until it returns, at most 60 s */
    for (int i = 0; i < 6000 && !__atomic_load_n(&returned, __ATOMIC_SEQ_CST); i++) {
      CHECK_EQ(pthread_kill(t, SIGUSR1), 0);
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    CHECK(returned, "%s was not interrupted by 6,000 signals", names[what]);
  } else {
    for (int i = 0; i < 5; i++) {
      int before = handled;
      CHECK_EQ(pthread_kill(t, SIGUSR1), 0);
      long long t0 = mono_ns_();
      while (handled == before) {
        CHECK(mono_ns_() - t0 < 30000000000LL, "%s: the handler did not run", names[what]);
        sched_yield();
      }
      wait_waiter_asleep(); /* waiting again */
      CHECK(!returned, "%s returned before it was released", names[what]);
    }
  }
  /* now release whatever it waits for */
  sem_post(&sem);
  __atomic_store_n(&fword, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &fword, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);

  if (what == MUTEX_LOCK) {
    pthread_mutex_unlock(&mu);
  } else {
    pthread_mutex_lock(&mu);
    flag = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
  }
  pthread_join(t, NULL);
  CHECK(handled >= 1, "the handler did not run");
  printf("%-22s %-10s -> %ld%s\n", names[what], restart ? "SA_RESTART" : "no restart", result,
         result == -1 ? (result_errno == EINTR ? " EINTR" : " other error") : "");
}

/* cancellation of sem_wait and of pthread_cond_timedwait */
static volatile int cleaned, mutex_held_in_cleanup;
static void cleanup_sem(void *arg) { cleaned = 1; }
static void cleanup_cond(void *arg) {
  cleaned = 1;
  mutex_held_in_cleanup = pthread_mutex_trylock(&mu) == EBUSY;
  pthread_mutex_unlock(&mu);
}
static void *cancel_sem(void *arg) {
  pthread_cleanup_push(cleanup_sem, NULL);
  ready_to_wait = self_tid();
  for (;;) sem_wait(&sem);
  pthread_cleanup_pop(0);
  return NULL;
}
static void *cancel_cond(void *arg) {
  pthread_mutex_lock(&mu);
  pthread_cleanup_push(cleanup_cond, NULL);
  ready_to_wait = self_tid();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 30;
  for (;;) pthread_cond_timedwait(&cv, &mu, &ts);
  pthread_cleanup_pop(0);
  return NULL;
}

static void cancel_case(void *(*fn)(void *), const char *name) {
  sem_init(&sem, 0, 0);
  cleaned = mutex_held_in_cleanup = 0;
  ready_to_wait = 0;
  pthread_t t;
  pthread_create(&t, NULL, fn, NULL);
  returned = 0;
  wait_waiter_asleep();
  pthread_cancel(t);
  void *r;
  pthread_join(t, &r);
  CHECK(r == PTHREAD_CANCELED, "%s: not canceled", name);
  CHECK(cleaned, "%s: cleanup did not run", name);
  printf("%s: canceled while blocked, cleanup ran%s\n", name,
         mutex_held_in_cleanup ? " with the mutex held" : "");
}

int main(void) {
  for (int restart = 0; restart < 2; restart++)
    for (int what = SEM_WAIT; what <= MUTEX_LOCK; what++) run(what, restart);
  cancel_case(cancel_sem, "sem_wait");
  cancel_case(cancel_cond, "pthread_cond_timedwait");
  return 0;
}
