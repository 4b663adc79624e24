/* Per-thread names, scheduling parameters, affinity and CPU clock of other
 * threads, by pthread_t. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include "common.h"

static volatile int stop;
static void *spin(void *arg) {
  while (!stop) sched_yield();
  return arg;
}

int main(void) {
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, spin, NULL), 0);
  char name[16];
  CHECK_EQ(pthread_setname_np(t, "worker-1"), 0);
  CHECK_EQ(pthread_getname_np(t, name, sizeof name), 0);
  CHECK(strcmp(name, "worker-1") == 0, "name %s", name);
  CHECK_EQ(pthread_setname_np(t, "a-name-that-is-too-long"), ERANGE);
  CHECK_EQ(pthread_getname_np(t, name, 4), ERANGE);

  int policy;
  struct sched_param sp;
  CHECK_EQ(pthread_getschedparam(t, &policy, &sp), 0);
  CHECK_EQ(policy, SCHED_OTHER);
  sp.sched_priority = 5;
  CHECK_EQ(pthread_setschedparam(t, SCHED_OTHER, &sp), EINVAL);
  sp.sched_priority = 0;
  CHECK_EQ(pthread_setschedparam(t, SCHED_BATCH, &sp), 0);
  CHECK_EQ(pthread_getschedparam(t, &policy, &sp), 0);
  CHECK_EQ(policy, SCHED_BATCH);
  CHECK_EQ(pthread_setschedprio(t, 3), EINVAL);

  cpu_set_t set;
  CHECK_EQ(pthread_getaffinity_np(t, sizeof set, &set), 0);
  CHECK(CPU_COUNT(&set) >= 1, "affinity has no CPU");
  CHECK_EQ(pthread_setaffinity_np(t, sizeof set, &set), 0);
  cpu_set_t none;
  CPU_ZERO(&none);
  CHECK_EQ(pthread_setaffinity_np(t, sizeof none, &none), EINVAL);

  clockid_t clk;
  CHECK_EQ(pthread_getcpuclockid(pthread_self(), &clk), 0);
  struct timespec ts;
  CHECK_EQ(clock_gettime(clk, &ts), 0);

  CHECK(pthread_equal(pthread_self(), pthread_self()), "equal self");
  CHECK(!pthread_equal(pthread_self(), t), "equal other");
  stop = 1;
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("names, scheduling parameters, affinity and CPU clocks ok\n");
  return 0;
}
