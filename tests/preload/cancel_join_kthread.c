/* pthread_cancel of a thread that joins a thread created by a constructor
 * (before main, so a kernel thread under an M:N library too): the join is a
 * cancellation point, whether the cancellation comes while the joiner waits
 * (pthread_join, pthread_timedjoin_np, pthread_clockjoin_np) or was pending
 * when it called pthread_join. The canceled joiner runs its cleanup
 * handler and ends with PTHREAD_CANCELED, the joined thread stays joinable,
 * and threads still run afterwards. */
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define NK 4
static pthread_t kt[NK];
static int kp[NK][2];
static int ctor_err;

static void *kthread(void *arg) {
  int i = (int)(intptr_t)arg;
  char c;
  if (read(kp[i][0], &c, 1) != 1) return NULL;
  return (void *)(intptr_t)(100 + i);
}

__attribute__((constructor)) static void make_kthreads(void) {
  for (int i = 0; i < NK; i++) {
    if (pipe(kp[i]) != 0 || pthread_create(&kt[i], NULL, kthread, (void *)(intptr_t)i) != 0)
      ctor_err = 1;
  }
}

static volatile int noted[NK];
static volatile int tids[NK];
static int gate[2];

static void note(void *arg) { noted[(intptr_t)arg] = 1; }

static void *joiner(void *arg) {
  int i = (int)(intptr_t)arg;
  void *ret = NULL;
  struct timespec t;
  if (i == 3) {
    /* The cancellation is already pending when the join starts. */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    tids[i] = self_tid();
    char c;
    CHECK_EQ(read(gate[0], &c, 1), 1);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
  }
  pthread_cleanup_push(note, arg);
  tids[i] = self_tid();
  switch (i) {
    case 0:
    case 3:
      pthread_join(kt[i], &ret);
      break;
    case 1:
      clock_gettime(CLOCK_REALTIME, &t);
      t.tv_sec += 600;
      pthread_timedjoin_np(kt[i], &ret, &t);
      break;
    case 2:
      clock_gettime(CLOCK_MONOTONIC, &t);
      t.tv_sec += 600;
      pthread_clockjoin_np(kt[i], &ret, CLOCK_MONOTONIC, &t);
      break;
  }
  pthread_cleanup_pop(0);
  return (void *)1; /* not reached: canceled */
}

static void *work(void *arg) { return (void *)((intptr_t)arg * 2); }

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  CHECK_EQ(ctor_err, 0);
  CHECK_EQ(pipe(gate), 0);
  const char *what[NK] = {"pthread_join", "pthread_timedjoin_np", "pthread_clockjoin_np",
                          "pthread_join (cancellation pending)"};
  for (int i = 0; i < NK; i++) {
    pthread_t j;
    tids[i] = 0;
    CHECK_EQ(pthread_create(&j, NULL, joiner, (void *)(intptr_t)i), 0);
    wait_flag(&tids[i]);
    if (i == 3) {
      CHECK_EQ(pthread_cancel(j), 0);
      CHECK_EQ(write(gate[1], "g", 1), 1);
    } else {
      wait_tid_asleep(tids[i], NULL); /* canceled while it waits, or at entry */
      CHECK_EQ(pthread_cancel(j), 0);
    }
    void *r;
    CHECK_EQ(pthread_join(j, &r), 0);
    CHECK(r == PTHREAD_CANCELED, "%s: the joiner returned %p", what[i], r);
    CHECK(noted[i], "%s: no cleanup handler ran", what[i]);
    /* The joined thread was not claimed by the canceled join. */
    CHECK_EQ(write(kp[i][1], "x", 1), 1);
    CHECK_EQ(pthread_join(kt[i], &r), 0);
    CHECK_EQ((intptr_t)r, 100 + i);
    /* Threads still run. */
    pthread_t w[8];
    for (int k = 0; k < 8; k++) CHECK_EQ(pthread_create(&w[k], NULL, work, (void *)(intptr_t)k), 0);
    for (int k = 0; k < 8; k++) {
      CHECK_EQ(pthread_join(w[k], &r), 0);
      CHECK_EQ((intptr_t)r, 2 * k);
    }
    printf("%s: canceled, cleanup ran, the thread stayed joinable\n", what[i]);
  }
  return 0;
}
