/* Asynchronous cancellation of a thread that keeps entering and leaving
 * waits, so that the cancellation lands at any point of the wait's way in
 * and out: the thread (cancel type asynchronous) loops over
 * pthread_mutex_timedlock on a mutex main holds (already expired deadline
 * and a short one: it never gets the mutex), nanosleep of 1 ns, and
 * sched_yield. Each round main cancels it at a varying moment; it must
 * end canceled with its cleanup handler run, and every other thread and
 * mutex must go on working: a cancellation that unwound the thread while
 * it was inside the threads library's own bookkeeping (a queue lock, a
 * timer) would leave the next round, or main's unlock, hanging. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include "common.h"

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER; /* main's, all rounds */
static pthread_mutex_t other = PTHREAD_MUTEX_INITIALIZER; /* never contended */

static volatile int started;
static volatile int cleaned;
static volatile int acquired;
static volatile int bad_result;

static void mark_cleaned(void *arg) {
  (void)arg;
  cleaned = 1;
}

static void *churn(void *arg) {
  int kind = (int)(long)arg;
  pthread_cleanup_push(mark_cleaned, NULL);
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
  __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
  for (unsigned i = 0;; i++) {
    int r;
    struct timespec ts;
    switch ((i + kind) % 4) {
      case 0: /* long expired */
        ts.tv_sec = 0;
        ts.tv_nsec = 0;
        r = pthread_mutex_timedlock(&held, &ts);
        if (r == 0) acquired = 1;
        else if (r != ETIMEDOUT) bad_result = r;
        break;
      case 1: /* a short wait */
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20000;
        if (ts.tv_nsec >= 1000000000) {
          ts.tv_sec++;
          ts.tv_nsec -= 1000000000;
        }
        r = pthread_mutex_timedlock(&held, &ts);
        if (r == 0) acquired = 1;
        else if (r != ETIMEDOUT) bad_result = r;
        break;
      case 2:
        ts.tv_sec = 0;
        ts.tv_nsec = 1;
        nanosleep(&ts, NULL);
        break;
      default:
        sched_yield();
        break;
    }
  }
  pthread_cleanup_pop(0);
  return NULL;
}

int main(void) {
  const int rounds = 400;
  CHECK_EQ(pthread_mutex_lock(&held), 0);
  for (int i = 0; i < rounds; i++) {
    started = cleaned = 0;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, churn, (void *)(long)i), 0);
    while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE)) sched_yield();
    yield_a_while((i % 16) * 20, 2000); /* vary where it is */
    CHECK_EQ(pthread_cancel(t), 0);
    void *r;
    CHECK_EQ(pthread_join(t, &r), 0);
    CHECK(r == PTHREAD_CANCELED, "round %d: join returned %p", i, r);
    CHECK(cleaned == 1, "round %d: cleanup handler did not run", i);
    CHECK(acquired == 0 && bad_result == 0, "round %d: acquired %d, timedlock returned %d", i,
          acquired, bad_result);
    /* Another mutex and a wait-free lock/unlock still work. */
    CHECK_EQ(pthread_mutex_lock(&other), 0);
    CHECK_EQ(pthread_mutex_unlock(&other), 0);
  }
  /* main's mutex: still main's, released and taken again. */
  CHECK_EQ(pthread_mutex_trylock(&held), EBUSY);
  CHECK_EQ(pthread_mutex_unlock(&held), 0);
  CHECK_EQ(pthread_mutex_lock(&held), 0);
  CHECK_EQ(pthread_mutex_unlock(&held), 0);
  printf("%d asynchronous cancellations of a thread entering and leaving waits: canceled, "
         "cleanup run, mutexes intact\n", rounds);
  return 0;
}
