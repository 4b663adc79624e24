// pthread_kill to threads that compute in leaf loops: each signal is
// delivered exactly once, on the thread it was sent to.
//
// NT computing threads (more than the processors an M:N runtime may use,
// so that they are switched out and in while signals are on their way)
// each get NROUND signals of their own standard signal from the main
// thread, one at a time: the main thread sends round r once the thread has
// published r, and the thread computes (a leaf loop, no calls) until its
// handler has recorded round r. The handler checks that it runs on the
// thread the signal was sent to (a thread-local index) and that a round is
// outstanding (a second delivery of one pthread_kill would find none), and
// counts. Every thread must run exactly NROUND handlers, none on another
// thread and none twice. Natively this holds by POSIX: pthread_kill makes
// the signal pending on that thread, and a standard signal is delivered
// once.
//
// Twice: as the process starts, and with RLIMIT_SIGPENDING at 0, i.e. the
// user's queue of pending signals full. The kernel then queues no siginfo
// for a signal sent to a thread (tgkill, rt_tgsigqueueinfo) but still
// delivers a standard one, without its siginfo (SI_USER from pid 0):
// natively nothing else changes.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common.h"

#define NT 4
#define NROUND 25

static const int sigs[NT] = {SIGUSR1, SIGUSR2, SIGWINCH, SIGURG};
static pthread_t th[NT];
static __thread int my_index = -1;
static volatile int ready[NT], handled[NT];
static volatile int n_run[NT], n_wrong[NT], n_extra[NT];
static volatile uint64_t sink[NT];

static inline uint64_t step(uint64_t x) { return x * 6364136223846793005ull + 1442695040888963407ull + (x >> 29); }

static int index_of(int sig) {
  for (int i = 0; i < NT; i++)
    if (sigs[i] == sig) return i;
  return -1;
}

static void handler(int sig) {
  int i = index_of(sig);
  if (i < 0) return;
  __atomic_add_fetch(&n_run[i], 1, __ATOMIC_RELAXED);
  if (my_index != i) {
    __atomic_add_fetch(&n_wrong[i], 1, __ATOMIC_RELAXED);
    return;
  }
  int r = __atomic_load_n(&ready[i], __ATOMIC_ACQUIRE);
  if (__atomic_load_n(&handled[i], __ATOMIC_RELAXED) == r) {
    __atomic_add_fetch(&n_extra[i], 1, __ATOMIC_RELAXED);  // no round outstanding
    return;
  }
  __atomic_store_n(&handled[i], r, __ATOMIC_RELEASE);
}

// A leaf loop (no calls) until round r is handled.
static __attribute__((noinline)) uint64_t compute_until(volatile int* flag, int r, uint64_t x) {
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != r) x = step(x);
  return x;
}

static __attribute__((noinline)) uint64_t short_work(uint64_t x, int n) {
  for (int k = 0; k < n; k++) x = step(x);
  return x;
}

static void* worker(void* arg) {
  int i = (int)(intptr_t)arg;
  my_index = i;
  uint64_t x = (uint64_t)i;
  for (int r = 1; r <= NROUND; r++) {
    __atomic_store_n(&ready[i], r, __ATOMIC_RELEASE);
    x = compute_until(&handled[i], r, x);
    x = short_work(x, (r * 7919) % 2000);
  }
  sink[i] = x;
  return NULL;
}

static void phase(const char* name) {
  for (int i = 0; i < NT; i++) {
    ready[i] = handled[i] = 0;
    n_run[i] = n_wrong[i] = n_extra[i] = 0;
  }
  for (int i = 0; i < NT; i++) CHECK(pthread_create(&th[i], NULL, worker, (void*)(intptr_t)i) == 0, "create");
  // Round by round, the threads in turn: one signal per thread and round,
  // sent once the thread computes in that round.
  for (int r = 1; r <= NROUND; r++)
    for (int i = 0; i < NT; i++) {
      while (__atomic_load_n(&ready[i], __ATOMIC_ACQUIRE) != r) sched_yield();
      CHECK(pthread_kill(th[i], sigs[i]) == 0, "pthread_kill");
    }
  for (int i = 0; i < NT; i++) CHECK(pthread_join(th[i], NULL) == 0, "join");
  for (int i = 0; i < NT; i++) {
    if (n_wrong[i] || n_extra[i] || n_run[i] != NROUND)
      fprintf(stderr, "%s: thread %d (signal %d): %d handlers, %d on another thread, %d without a round\n", name, i,
              sigs[i], n_run[i], n_wrong[i], n_extra[i]);
    CHECK_EQ(n_wrong[i], 0);
    CHECK_EQ(n_extra[i], 0);
    CHECK_EQ(n_run[i], NROUND);
  }
  printf("%s: %d threads, %d signals each, each run once on its thread\n", name, NT, NROUND);
}

int main(void) {
  for (int i = 0; i < NT; i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(sigs[i], &sa, NULL) == 0, "sigaction");
  }
  phase("queue open");
  struct rlimit rl;
  CHECK_EQ(getrlimit(RLIMIT_SIGPENDING, &rl), 0);
  rl.rlim_cur = 0;
  CHECK_EQ(setrlimit(RLIMIT_SIGPENDING, &rl), 0);
  phase("queue full");
  // A late second delivery of a last round's signal would have run by now
  // on the main thread, which leaves every signal open (and counted as on
  // another thread); one still pending would show here.
  sigset_t all;
  sigemptyset(&all);
  for (int i = 0; i < NT; i++) sigaddset(&all, sigs[i]);
  CHECK(pthread_sigmask(SIG_BLOCK, &all, NULL) == 0, "sigmask");
  sigset_t pend;
  CHECK(sigpending(&pend) == 0, "sigpending");
  for (int i = 0; i < NT; i++) {
    CHECK(!sigismember(&pend, sigs[i]), "signal %d still pending after every round was handled", sigs[i]);
    CHECK_EQ(n_wrong[i], 0);
  }
  return 0;
}
