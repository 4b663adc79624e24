/* Idle kernel threads racing for the netpoller: CPU-bound workers that
 * block in file I/O now and then (their processor handed off), woken
 * through pipes, one thread waiting in poll() on an eventfd with a long
 * timeout (an event loop's shape: qemu-img's), and short sleeps. Under
 * goshim the processors go idle and busy thousands of times a second, and
 * an idle kernel thread decides again and again whether to sleep in the
 * netpoller or on the idle list. It once could do both: a few runs in a
 * hundred at the default configuration died with "stopm: M holds a P or
 * spins" / "startm: idle M in bad state" or hung (found with
 * `qemu-img convert -m 8 -W`). Every round's replies are counted. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define W 6
static int efd, tmpfd, req[W][2], done[2];
static volatile unsigned long sink;
static long served[W];
static long woken;

static void *worker(void *a) {
  long k = (long)a;
  char c;
  static char buf[W][65536];
  for (;;) {
    CHECK_EQ(read(req[k][0], &c, 1), 1);
    if (c == 'q') break;
    unsigned long h = k;
    for (int i = 0; i < 20000; i++) h = h * 6364136223846793005ul + i; /* compute */
    sink = h;
    memset(buf[k], (int)h, sizeof buf[k]);
    CHECK(pwrite(tmpfd, buf[k], sizeof buf[k], (off_t)k * 65536) == 65536, "pwrite");
    served[k]++;
    CHECK_EQ(write(done[1], &c, 1), 1);
  }
  return NULL;
}

static void *event_loop(void *a) {
  (void)a;
  struct pollfd pf = {efd, POLLIN, 0};
  for (;;) {
    int r = poll(&pf, 1, 700);
    CHECK(r >= 0, "poll");
    if (r > 0) {
      unsigned long v;
      CHECK_EQ(read(efd, &v, 8), 8);
      if (v >= 1000000) { /* the stop value, and posts not read yet */
        woken += (long)(v - 1000000);
        break;
      }
      woken += (long)v;
    }
  }
  return NULL;
}

int main(void) {
  int rounds = env_int("ROUNDS", 60000);
  const int period = 50;
  char path[] = "/tmp/netpoll_idle_race.XXXXXX";
  tmpfd = mkstemp(path);
  CHECK(tmpfd >= 0, "mkstemp");
  unlink(path);
  efd = eventfd(0, 0);
  CHECK(efd >= 0, "eventfd");
  CHECK_EQ(pipe(done), 0);
  pthread_t t[W], ev;
  for (long k = 0; k < W; k++) {
    CHECK_EQ(pipe(req[k]), 0);
    CHECK_EQ(pthread_create(&t[k], NULL, worker, (void *)k), 0);
  }
  CHECK_EQ(pthread_create(&ev, NULL, event_loop, NULL), 0);
  char c = 'x';
  long asked[W] = {0}, posted = 0;
  for (int r = 0; r < rounds; r++) {
    int n = 1 + r % W;
    for (int k = 0; k < n; k++) {
      CHECK_EQ(write(req[k][1], &c, 1), 1);
      asked[k]++;
    }
    for (int k = 0; k < n; k++) CHECK_EQ(read(done[0], &c, 1), 1);
    if (r % period == 0) {
      unsigned long v = 1;
      CHECK_EQ(write(efd, &v, 8), 8);
      posted++;
    }
    if (r % 50 == 0) {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
  }
  c = 'q';
  for (int k = 0; k < W; k++) CHECK_EQ(write(req[k][1], &c, 1), 1);
  for (int k = 0; k < W; k++) CHECK_EQ(pthread_join(t[k], NULL), 0);
  unsigned long v = 1000000;
  CHECK_EQ(write(efd, &v, 8), 8);
  CHECK_EQ(pthread_join(ev, NULL), 0);
  for (int k = 0; k < W; k++)
    CHECK(served[k] == asked[k], "worker %d served %ld of %ld", k, served[k], asked[k]);
  CHECK(woken == posted, "event loop saw %ld of %ld posts", woken, posted);
  printf("%d rounds served by %d workers, event loop woken\n", rounds, W);
  return 0;
}
