/* stdio's FILE locks belong to a thread: while one thread holds
 * flockfile(stdout) across yields, ftrylockfile from another thread fails
 * (under M:N even when both run on the same kernel thread), and succeeds
 * once it is released. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include "common.h"

static volatile int held, checked, released;

static void *holder(void *arg) {
  flockfile(stdout);
  /* recursive: the owner may lock again */
  CHECK_EQ(ftrylockfile(stdout), 0);
  funlockfile(stdout);
  held = 1;
  while (!checked) sched_yield();
  funlockfile(stdout);
  released = 1;
  return arg;
}

static void *prober(void *arg) {
  while (!held) sched_yield();
  int fails = 0;
  for (int i = 0; i < 100; i++) {
    if (ftrylockfile(stdout) != 0) fails++;
    else funlockfile(stdout);
    sched_yield();
  }
  CHECK(fails == 100, "ftrylockfile succeeded %d times while another thread held the lock",
        100 - fails);
  checked = 1;
  while (!released) sched_yield();
  CHECK_EQ(ftrylockfile(stdout), 0);
  printf("stdout lock is per thread\n");
  funlockfile(stdout);
  return arg;
}

int main(void) {
  pthread_t a, b;
  CHECK_EQ(pthread_create(&a, NULL, holder, NULL), 0);
  CHECK_EQ(pthread_create(&b, NULL, prober, NULL), 0);
  CHECK_EQ(pthread_join(a, NULL), 0);
  CHECK_EQ(pthread_join(b, NULL), 0);
  return 0;
}
