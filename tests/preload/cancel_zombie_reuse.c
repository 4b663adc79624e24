/* pthread_cancel of a thread that has ended but is not joined yet (a
 * zombie) returns 0 and changes nothing for the next threads: a thread
 * created after the join, which may reuse the ended thread's memory, is
 * not cancelled at its cancellation points. 2,000 rounds. */
#include <pthread.h>
#include <stdio.h>
#include "common.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long done_round = -1;

/* Tells main it is done, with no cancellation point on the way. */
static void *ender(void *arg) {
  pthread_mutex_lock(&mu);
  done_round = (long)arg;
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
  return arg;
}

static void *worker(void *arg) {
  pthread_testcancel(); /* a cancellation point: must just return */
  return arg;
}

int main(void) {
  for (long i = 0; i < 2000; i++) {
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, ender, (void *)(i + 1)), 0);
    pthread_mutex_lock(&mu);
    while (done_round != i + 1) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    CHECK_EQ(pthread_cancel(t), 0); /* running past its last point, or ended */
    void *r;
    CHECK_EQ(pthread_join(t, &r), 0);
    CHECK(r == (void *)(i + 1), "round %ld: ender returned %p", i, r);
    pthread_t w;
    CHECK_EQ(pthread_create(&w, NULL, worker, (void *)(i + 7)), 0);
    CHECK_EQ(pthread_join(w, &r), 0);
    CHECK(r == (void *)(i + 7), "round %ld: the next thread was cancelled (%p)", i, r);
  }
  printf("2000 rounds\n");
  return 0;
}
