// Signal handlers for threads that switch all the time.
//
// Four threads call sched_yield() in a loop (with more threads than CPUs
// they keep giving up and taking back their CPU); the main thread sends
// them SIGWINCH with pthread_kill, NSIG_SENT times in turn. The handler
// (no SA_ONSTACK, no sigaltstack) must run on the thread it was sent to,
// with its frame inside that thread's own stack, every time. Standard
// signals merge, so the number of handler runs is only bounded: at least
// one per thread, at most the number sent to it.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define NT 4
#define NSIG_SENT 100000

static pthread_t th[NT];
static uintptr_t lo[NT], hi[NT];
static volatile int ready[NT], stop;
static volatile long runs[NT], bad_where[NT], bad_thread;
static long sent[NT];
static volatile uintptr_t bad_at[NT];  // the first frame outside its stack
static __thread int me = -1;

static void handler(int sig) {
  (void)sig;
  int saved = errno;
  char here;
  uintptr_t a = (uintptr_t)&here;
  int i = me;
  if (i < 0 || i >= NT) {
    bad_thread++;
  } else {
    if (a < lo[i] || a >= hi[i]) {
      if (!bad_where[i]) bad_at[i] = a;
      bad_where[i]++;
    }
    runs[i]++;
  }
  errno = saved;
}

static void* worker(void* arg) {
  int i = (int)(intptr_t)arg;
  me = i;
  self_stack(&lo[i], &hi[i]);
  __atomic_store_n(&ready[i], 1, __ATOMIC_RELEASE);
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) sched_yield();
  return NULL;
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGWINCH, &sa, NULL) == 0, "sigaction");
  for (int i = 0; i < NT; i++) CHECK(pthread_create(&th[i], NULL, worker, (void*)(intptr_t)i) == 0, "create");
  for (int i = 0; i < NT; i++)
    while (!__atomic_load_n(&ready[i], __ATOMIC_ACQUIRE)) sched_yield();
  for (int n = 0; n < NSIG_SENT; n++) {
    int i = n % NT;
    CHECK(pthread_kill(th[i], SIGWINCH) == 0, "pthread_kill");
    sent[i]++;
    if (n % 64 == 0) sched_yield();
  }
  // Every thread handles what is still pending before it ends.
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < NT; i++) CHECK(pthread_join(th[i], NULL) == 0, "join");
  CHECK_EQ(bad_thread, 0);
  for (int i = 0; i < NT; i++) {
    CHECK(bad_where[i] == 0, "thread %d: %ld handler frames outside its stack [%#lx, %#lx), the first at %#lx", i,
          bad_where[i], (unsigned long)lo[i], (unsigned long)hi[i], (unsigned long)bad_at[i]);
    CHECK(runs[i] >= 1 && runs[i] <= sent[i], "thread %d: %ld handler runs for %ld signals", i, runs[i], sent[i]);
  }
  printf("%d threads: %d signals sent, every handler ran on its thread's own stack\n", NT, NSIG_SENT);
  return 0;
}
