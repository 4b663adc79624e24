/* Per-thread names, scheduling parameters, affinity and CPU clock of other
 * threads, by pthread_t: a name set on another thread is what that thread
 * reads as its own and leaves the caller's name alone; another thread's CPU
 * clock reads that thread's time (at least what it read itself), not the
 * caller's. (thread_cputime checks the CPU clocks in depth.) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <time.h>
#include "common.h"

static volatile int stop, named;
static sem_t burned;
static char own_name[16];
static volatile long long own_cpu;

static long long cpu_ns(clockid_t c) {
  struct timespec ts;
  CHECK_EQ(clock_gettime(c, &ts), 0);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *spin(void *arg) {
  while (!named) sched_yield();
  CHECK_EQ(pthread_getname_np(pthread_self(), own_name, sizeof own_name), 0);
  /* 20 ms of its own CPU time, as its own clock counts it. */
  long long t0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID), now;
  volatile unsigned long x = 0;
  while ((now = cpu_ns(CLOCK_THREAD_CPUTIME_ID)) - t0 < 20000000LL)
    for (int i = 0; i < 10000; i++) x += i;
  own_cpu = now;
  CHECK_EQ(sem_post(&burned), 0);
  while (!stop) sched_yield();
  return arg;
}

int main(void) {
  CHECK_EQ(sem_init(&burned, 0, 0), 0);
  char main_name[16], name[16];
  CHECK_EQ(pthread_getname_np(pthread_self(), main_name, sizeof main_name), 0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, spin, NULL), 0);
  CHECK_EQ(pthread_setname_np(t, "worker-1"), 0);
  CHECK_EQ(pthread_getname_np(t, name, sizeof name), 0);
  CHECK(strcmp(name, "worker-1") == 0, "name %s", name);
  CHECK_EQ(pthread_getname_np(pthread_self(), name, sizeof name), 0);
  CHECK(strcmp(name, main_name) == 0, "main's name %s became %s", main_name, name);
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

  /* The thread reads the name set on it as its own. Its CPU clock, read
   * here (the clock is asked for before it starts burning CPU), holds at
   * least the 20 ms it saw on its own clock; main's clock does not count
   * them: main sleeps in sem_wait meanwhile. */
  clockid_t clk, tclk;
  CHECK_EQ(pthread_getcpuclockid(pthread_self(), &clk), 0);
  CHECK_EQ(pthread_getcpuclockid(t, &tclk), 0);
  long long m0 = cpu_ns(clk);
  named = 1;
  CHECK_EQ(sem_wait(&burned), 0);
  long long m1 = cpu_ns(clk);
  CHECK(m1 - m0 < 20000000LL, "main's clock grew by %lld ns while it waited", m1 - m0);
  CHECK(strcmp(own_name, "worker-1") == 0, "the thread reads its name as %s", own_name);
  long long tv = cpu_ns(tclk);
  CHECK(tv >= own_cpu, "its clock read here %lld, read by itself %lld", tv, (long long)own_cpu);
  CHECK(tv >= 20000000LL, "its clock read here %lld ns after 20 ms of work", tv);

  CHECK(pthread_equal(pthread_self(), pthread_self()), "equal self");
  CHECK(!pthread_equal(pthread_self(), t), "equal other");
  stop = 1;
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("names, scheduling parameters, affinity and CPU clocks ok\n");
  return 0;
}
