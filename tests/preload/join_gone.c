/* pthread_join, pthread_tryjoin_np, pthread_timedjoin_np and
 * pthread_detach on threads that are gone, with glibc's error codes:
 *   a detached thread, before and after it has exited: EINVAL (glibc's
 *   descriptor still says detached while it is not reused);
 *   a joinable thread already joined: ESRCH;
 *   the calling thread: EDEADLK;
 * and pthread_tryjoin_np's EBUSY while the thread runs, on the caller
 * itself, and on a thread already joined (glibc tests the descriptor's
 * tid first, -1 after a join).
 * No thread is created while an old handle is still used (a new thread
 * may reuse the old one's descriptor, natively as under goshim). */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static sem_t done;

static void *detached_body(void *arg) {
  sem_post(&done);
  return arg;
}

static void *joinable_body(void *arg) { return arg; }

static volatile int last_tid;
static void *tid_body(void *arg) {
  last_tid = self_tid();
  return arg;
}

static sem_t go;

static void *waiting_body(void *arg) {
  sem_wait(&go);
  return arg;
}

static void check_detached(pthread_t t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 5;
  CHECK_EQ(pthread_join(t, NULL), EINVAL);
  CHECK_EQ(pthread_timedjoin_np(t, NULL, &ts), EINVAL);
  CHECK_EQ(pthread_detach(t), EINVAL);
  int r = pthread_tryjoin_np(t, NULL);
  CHECK(r == EINVAL || r == EBUSY, "pthread_tryjoin_np: %d", r);
}

/* Once the detached thread has finished exiting, tryjoin says EINVAL. */
static void check_detached_gone(pthread_t t) {
  int r, i;
  /* a bounded poll of the runtime's effect (nothing announces it) */
  for (i = 0; i < 10000 && (r = pthread_tryjoin_np(t, NULL)) == EBUSY; i++) usleep(1000);
  CHECK_EQ(r, EINVAL);
  check_detached(t);
}

int main(void) {
  CHECK_EQ(sem_init(&done, 0, 0), 0);
  CHECK_EQ(pthread_join(pthread_self(), NULL), EDEADLK);
  CHECK_EQ(pthread_tryjoin_np(pthread_self(), NULL), EBUSY);

  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  for (int round = 0; round < 20; round++) {
    pthread_t t;
    CHECK_EQ(pthread_create(&t, &a, detached_body, NULL), 0);
    CHECK_EQ(sem_wait(&done), 0);
    check_detached(t); /* exiting or gone: the same answers */
    check_detached_gone(t);
  }
  printf("detached and exited: EINVAL\n");

  /* Detached after it exited (pthread_detach frees it): still EINVAL. */
  for (int round = 0; round < 20; round++) {
    pthread_t t;
    last_tid = 0;
    CHECK_EQ(pthread_create(&t, NULL, tid_body, NULL), 0);
    /* It has exited: its kernel thread is gone (or, under an M:N runtime,
       sleeps with nothing left to run). */
    wait_flag(&last_tid);
    wait_tid_asleep(last_tid, NULL);
    CHECK_EQ(pthread_detach(t), 0);
    check_detached_gone(t);
  }
  printf("detached later: EINVAL\n");

  for (int round = 0; round < 20; round++) {
    pthread_t t;
    void *ret = NULL;
    CHECK_EQ(pthread_create(&t, NULL, joinable_body, (void *)(long)(round + 1)), 0);
    CHECK_EQ(pthread_join(t, &ret), 0);
    CHECK_EQ((long)ret, round + 1);
    CHECK_EQ(pthread_join(t, NULL), ESRCH);
    CHECK_EQ(pthread_tryjoin_np(t, NULL), EBUSY);
    CHECK_EQ(pthread_detach(t), ESRCH);
  }
  printf("joined already: ESRCH\n");

  /* Running: tryjoin says EBUSY, for a joinable and a detached thread. */
  CHECK_EQ(sem_init(&go, 0, 0), 0);
  pthread_t j, d;
  CHECK_EQ(pthread_create(&j, NULL, waiting_body, NULL), 0);
  CHECK_EQ(pthread_create(&d, &a, waiting_body, NULL), 0);
  CHECK_EQ(pthread_tryjoin_np(j, NULL), EBUSY);
  CHECK_EQ(pthread_tryjoin_np(d, NULL), EBUSY);
  CHECK_EQ(pthread_join(d, NULL), EINVAL);
  sem_post(&go);
  sem_post(&go);
  CHECK_EQ(pthread_join(j, NULL), 0);
  check_detached_gone(d);
  printf("running: EBUSY\n");
  return 0;
}
