/* Cancellation of threads waiting on synchronization objects:
 *  - asynchronous cancellation of a thread on its way into, or blocked in,
 *    pthread_mutex_lock (private and process-shared mutexes): it ends
 *    canceled, its cleanup handler runs, it never owns the mutex;
 *  - deferred cancellation of a thread in pthread_cond_wait and
 *    pthread_cond_timedwait on a process-shared condvar in a shared
 *    mapping: it ends canceled and its cleanup handler runs with the
 *    mutex held again (an error-checking mutex: unlock succeeds only for
 *    its owner).
 * Each case runs many times so that the cancel lands both before and
 * after the thread blocks. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

struct shared {
  pthread_mutex_t lock;  /* held by main while the thread tries it */
  pthread_mutex_t cm;    /* the condvar's mutex (error-checking) */
  pthread_cond_t cv;
};
static struct shared *sh;
static pthread_mutex_t plock = PTHREAD_MUTEX_INITIALIZER;

static volatile int started;
static volatile int cleaned;
static volatile int unlock_result;
static volatile int locked;

static void mark_cleaned(void *arg) {
  (void)arg;
  cleaned = 1;
}

static void *async_lock(void *arg) {
  pthread_mutex_t *m = arg;
  pthread_cleanup_push(mark_cleaned, NULL);
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
  started = 1;
  pthread_mutex_lock(m);
  locked = 1; /* never reached: the mutex stays with main */
  pthread_cleanup_pop(0);
  return NULL;
}

static void unlock_cm(void *arg) {
  (void)arg;
  unlock_result = pthread_mutex_unlock(&sh->cm);
  cleaned = 1;
}

static void *cond_waiter(void *arg) {
  int timed = (int)(intptr_t)arg;
  pthread_mutex_lock(&sh->cm);
  pthread_cleanup_push(unlock_cm, NULL);
  started = 1;
  for (;;) {
    if (timed) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 3600;
      pthread_cond_timedwait(&sh->cv, &sh->cm, &ts);
    } else {
      pthread_cond_wait(&sh->cv, &sh->cm);
    }
  }
  pthread_cleanup_pop(1);
  return NULL;
}

static void run_lock_case(pthread_mutex_t *m, const char *what, int iters) {
  for (int i = 0; i < iters; i++) {
    CHECK_EQ(pthread_mutex_lock(m), 0);
    started = cleaned = locked = 0;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, async_lock, m), 0);
    while (!started) sched_yield();
    yield_a_while((i % 8) * 50, 2000); /* vary where it is */
    CHECK_EQ(pthread_cancel(t), 0);
    void *r;
    CHECK_EQ(pthread_join(t, &r), 0);
    CHECK(r == PTHREAD_CANCELED, "%s %d: join returned %p", what, i, r);
    CHECK(cleaned == 1 && locked == 0, "%s %d: cleaned %d locked %d", what, i, cleaned, locked);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
  }
  /* The mutex still works for other threads. */
  CHECK_EQ(pthread_mutex_lock(m), 0);
  CHECK_EQ(pthread_mutex_unlock(m), 0);
}

static void run_cond_case(int timed, int iters) {
  for (int i = 0; i < iters; i++) {
    started = cleaned = 0;
    unlock_result = -1;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, cond_waiter, (void *)(intptr_t)timed), 0);
    while (!started) sched_yield();
    /* The waiter held cm when it set started; once main gets cm the
     * waiter is inside the wait (it dropped the mutex there). */
    if (i % 2) {
      CHECK_EQ(pthread_mutex_lock(&sh->cm), 0);
      CHECK_EQ(pthread_mutex_unlock(&sh->cm), 0);
    }
    CHECK_EQ(pthread_cancel(t), 0);
    void *r;
    CHECK_EQ(pthread_join(t, &r), 0);
    CHECK(r == PTHREAD_CANCELED, "cond %s %d: join returned %p", timed ? "timedwait" : "wait", i, r);
    CHECK(cleaned == 1 && unlock_result == 0, "cond %s %d: cleaned %d, unlock in handler %d",
          timed ? "timedwait" : "wait", i, cleaned, unlock_result);
  }
  CHECK_EQ(pthread_mutex_trylock(&sh->cm), 0);
  CHECK_EQ(pthread_mutex_unlock(&sh->cm), 0);
}

int main(void) {
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(sh != MAP_FAILED, "mmap");
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  CHECK_EQ(pthread_mutex_init(&sh->lock, &ma), 0);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
  CHECK_EQ(pthread_mutex_init(&sh->cm, &ma), 0);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
  CHECK_EQ(pthread_cond_init(&sh->cv, &ca), 0);

  run_lock_case(&plock, "private mutex", 100);
  run_lock_case(&sh->lock, "pshared mutex", 100);
  run_cond_case(0, 50);
  run_cond_case(1, 50);
  printf("asynchronous cancellation in mutex_lock (private, pshared); cancellation in "
         "pshared cond_wait and cond_timedwait with the mutex held in the handler\n");
  return 0;
}
