// The kernel's signal mask of a thread while its handler runs, as the
// thread's own /proc/thread-self/status shows it (SigBlk): the interrupted
// mask, the handler's sa_mask and, without SA_NODEFER, its own signal,
// nothing else of the signals this program uses (SIGUSR1, SIGUSR2,
// SIGTERM, SIGWINCH). Three SIGUSR1 handlers:
//   masked:      sa_mask {SIGTERM}             -> SIGUSR1, SIGTERM
//   nodefer:     sa_mask {SIGTERM}, SA_NODEFER -> SIGTERM
//   interrupted: sa_mask {}, SIGWINCH blocked by the thread when the
//                signal comes                  -> SIGUSR1, SIGWINCH
// each ROUNDS times: sent by the main thread and by a second thread to
// themselves, and by the main thread to a third thread that computes
// with SIGWINCH blocked (the signal interrupts it wherever it is). Outside
// the handlers a thread's mask is its own again.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "common.h"

#define ROUNDS 100

static const int used[] = {SIGUSR1, SIGUSR2, SIGTERM, SIGWINCH};
static volatile unsigned long long in_handler;
static volatile int ran;
static volatile unsigned long spin;

// The calling thread's kernel mask (SigBlk), restricted to the signals
// used here. Async-signal-safe (open, read: the handler calls it).
static unsigned long long kernel_mask(void) {
  char buf[4096];
  int fd = open("/proc/thread-self/status", O_RDONLY);
  CHECK(fd >= 0, "open /proc/thread-self/status");
  ssize_t n = 0, r;
  while (n < (ssize_t)sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0) n += r;
  close(fd);
  buf[n] = 0;
  const char* p = strstr(buf, "\nSigBlk:");
  CHECK(p != NULL, "no SigBlk line");
  unsigned long long m = strtoull(p + 8, NULL, 16);
  unsigned long long only = 0;
  for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) only |= 1ull << (used[i] - 1);
  return m & only;
}

static unsigned long long bits2(int a, int b) { return (1ull << (a - 1)) | (1ull << (b - 1)); }

static void handler(int sig) {
  (void)sig;
  in_handler = kernel_mask();
  __atomic_store_n(&ran, 1, __ATOMIC_RELEASE);
}

enum { MASKED, NODEFER, INTERRUPTED };
static const char* const kind_name[] = {"masked", "nodefer", "interrupted"};

// SIGUSR1's handler for round kind k: sa_mask SIGTERM (but for
// INTERRUPTED), SA_NODEFER for NODEFER.
static void install_kind(int k) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  if (k != INTERRUPTED) sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_flags = k == NODEFER ? SA_NODEFER : 0;
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
}

static void round_of(const char* who, int k) {
  install_kind(k);
  sigset_t winch, old;
  sigemptyset(&winch);
  sigaddset(&winch, SIGWINCH);
  if (k == INTERRUPTED) CHECK(pthread_sigmask(SIG_BLOCK, &winch, &old) == 0, "pthread_sigmask");
  unsigned long long before = kernel_mask();
  __atomic_store_n(&ran, 0, __ATOMIC_RELAXED);
  CHECK(pthread_kill(pthread_self(), SIGUSR1) == 0, "pthread_kill");
  while (!__atomic_load_n(&ran, __ATOMIC_ACQUIRE)) sched_yield();
  unsigned long long want = k == MASKED    ? bits2(SIGUSR1, SIGTERM)
                            : k == NODEFER ? 1ull << (SIGTERM - 1)
                                           : bits2(SIGUSR1, SIGWINCH);
  CHECK(in_handler == want, "%s, %s handler: kernel mask %#llx of signals 10, 12, 15, 28, %#llx expected", who,
        kind_name[k], in_handler, want);
  CHECK(kernel_mask() == before, "%s, %s: kernel mask %#llx after the handler, %#llx before", who, kind_name[k],
        kernel_mask(), before);
  if (k == INTERRUPTED) CHECK(pthread_sigmask(SIG_SETMASK, &old, NULL) == 0, "pthread_sigmask");
}

static void rounds(const char* who) {
  for (int i = 0; i < ROUNDS; i++) {
    for (int k = MASKED; k <= INTERRUPTED; k++) round_of(who, k);
    for (int j = 0; j < 20000; j++) spin++;
  }
  printf("%s: %d rounds of masked, nodefer and interrupted handlers\n", who, ROUNDS);
}

static void* worker(void* arg) {
  (void)arg;
  rounds("thread");
  return NULL;
}

static volatile int stop;

static void* computer(void* arg) {
  (void)arg;
  sigset_t winch;
  sigemptyset(&winch);
  sigaddset(&winch, SIGWINCH);
  CHECK(pthread_sigmask(SIG_BLOCK, &winch, NULL) == 0, "pthread_sigmask");
  __atomic_store_n(&ran, 1, __ATOMIC_RELEASE);
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) spin++;
  return NULL;
}

// Rounds sent by the main thread to a computing thread: its handlers
// interrupt its computation.
static void rounds_to(pthread_t t) {
  unsigned long long winch = 1ull << (SIGWINCH - 1);
  for (int i = 0; i < ROUNDS; i++)
    for (int k = MASKED; k <= INTERRUPTED; k++) {
      install_kind(k);
      __atomic_store_n(&ran, 0, __ATOMIC_RELAXED);
      CHECK(pthread_kill(t, SIGUSR1) == 0, "pthread_kill");
      while (!__atomic_load_n(&ran, __ATOMIC_ACQUIRE)) sched_yield();
      unsigned long long want = winch | (k == MASKED    ? bits2(SIGUSR1, SIGTERM)
                                         : k == NODEFER ? 1ull << (SIGTERM - 1)
                                                        : 1ull << (SIGUSR1 - 1));
      CHECK(in_handler == want, "computing thread, %s handler: kernel mask %#llx of signals 10, 12, 15, 28, %#llx "
            "expected", kind_name[k], in_handler, want);
    }
  printf("computing thread: %d rounds of masked, nodefer and interrupted handlers\n", ROUNDS);
}

int main(void) {
  sigset_t none;
  sigemptyset(&none);
  CHECK(pthread_sigmask(SIG_SETMASK, &none, NULL) == 0, "pthread_sigmask");
  rounds("main");
  pthread_t t;
  CHECK(pthread_create(&t, NULL, worker, NULL) == 0, "create");
  CHECK(pthread_join(t, NULL) == 0, "join");
  __atomic_store_n(&ran, 0, __ATOMIC_RELAXED);
  CHECK(pthread_create(&t, NULL, computer, NULL) == 0, "create");
  while (!__atomic_load_n(&ran, __ATOMIC_ACQUIRE)) sched_yield();
  rounds_to(t);
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  CHECK(pthread_join(t, NULL) == 0, "join");
  return 0;
}
