// Signal handlers that block, on threads with and without an alternate
// signal stack, while the threads compute.
//
// Four computing threads (leaf loops, no calls) each get NROUND signals
// from the main thread, one at a time (a handshake per signal):
//   T0: SIGUSR1, handler SA_ONSTACK, no sigaltstack: runs on T0's stack;
//   T1: SIGURG, handler SA_ONSTACK, no sigaltstack: runs on T1's stack;
//   T2: SIGUSR2, handler SA_ONSTACK, with a sigaltstack: runs on it;
//   T3: SIGWINCH, handler without SA_ONSTACK, no sigaltstack: T3's stack.
// Each handler records that it runs, then blocks in read() on a pipe of
// its own until a writer thread, which waits for that record, writes the
// round's byte; the handler checks the byte and where its frame lies
// (inside its thread's stack, or its alternate stack), and the thread
// computes on until its round is handled. Several handlers may be blocked
// at once. Results (counts, bytes, locations, the computation) exact.
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
#include <unistd.h>

#include "common.h"

#define NT 4
#define NROUND 25
#define ALT (64 * 1024)

static const int sigs[NT] = {SIGUSR1, SIGURG, SIGUSR2, SIGWINCH};
static const int onstack[NT] = {1, 1, 1, 0};
static const int has_alt[NT] = {0, 0, 1, 0};
static pthread_t th[NT];
static int pipes[NT][2];
static uintptr_t lo[NT], hi[NT];  // where the thread's handler must run
static volatile int ready[NT], entered[NT], handled[NT];
static volatile int bad_where[NT], bad_byte[NT], bad_read[NT];
static uint64_t result[NT];
static volatile uint64_t sink;

static inline uint64_t step(uint64_t x) { return x * 6364136223846793005ull + 1442695040888963407ull + (x >> 29); }

static int index_of(int sig) {
  for (int i = 0; i < NT; i++)
    if (sigs[i] == sig) return i;
  return -1;
}

static void handler(int sig) {
  int saved = errno;
  int i = index_of(sig);
  char here;
  uintptr_t a = (uintptr_t)&here;
  if (a < lo[i] || a >= hi[i]) bad_where[i]++;
  int r = ready[i];
  __atomic_store_n(&entered[i], r, __ATOMIC_RELEASE);
  unsigned char c = 0;
  ssize_t n;
  do n = read(pipes[i][0], &c, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1) bad_read[i]++;
  if (c != (unsigned char)r) bad_byte[i]++;
  __atomic_store_n(&handled[i], r, __ATOMIC_RELEASE);
  errno = saved;
}

// A leaf loop (no calls) until round r is handled.
static __attribute__((noinline)) uint64_t compute_until(volatile int* flag, int r, uint64_t x) {
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != r) x = step(x);
  return x;
}

static __attribute__((noinline)) uint64_t fixed_work(uint64_t x) {
  for (int k = 0; k < 200000; k++) x = step(x);
  return x;
}

static void* worker(void* arg) {
  int i = (int)(intptr_t)arg;
  if (has_alt[i]) {
    stack_t ss;
    ss.ss_sp = malloc(ALT);
    ss.ss_size = ALT;
    ss.ss_flags = 0;
    CHECK(ss.ss_sp && sigaltstack(&ss, NULL) == 0, "sigaltstack");
    lo[i] = (uintptr_t)ss.ss_sp;
    hi[i] = lo[i] + ALT;
  } else {
    self_stack(&lo[i], &hi[i]);
  }
  uint64_t spin = 0, acc = (uint64_t)i;
  for (int r = 1; r <= NROUND; r++) {
    __atomic_store_n(&ready[i], r, __ATOMIC_RELEASE);
    spin = compute_until(&handled[i], r, spin);
    acc = fixed_work(acc ^ (uint64_t)r);
  }
  sink = spin;
  result[i] = acc;
  return NULL;
}

static void wait_eq(volatile int* v, int want) {
  while (__atomic_load_n(v, __ATOMIC_ACQUIRE) != want) sched_yield();
}

static void* writer(void* arg) {
  (void)arg;
  for (int r = 1; r <= NROUND; r++)
    for (int i = 0; i < NT; i++) {
      wait_eq(&entered[i], r);
      unsigned char c = (unsigned char)r;
      CHECK(write(pipes[i][1], &c, 1) == 1, "write");
    }
  return NULL;
}

int main(void) {
  for (int i = 0; i < NT; i++) {
    CHECK(pipe(pipes[i]) == 0, "pipe");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = onstack[i] ? SA_ONSTACK : 0;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(sigs[i], &sa, NULL) == 0, "sigaction");
  }
  for (int i = 0; i < NT; i++) CHECK(pthread_create(&th[i], NULL, worker, (void*)(intptr_t)i) == 0, "create");
  pthread_t w;
  CHECK(pthread_create(&w, NULL, writer, NULL) == 0, "create writer");
  // Round by round: each thread computing in round r gets one signal, and
  // the next only once its handler has run (the writer ends each handler).
  for (int r = 1; r <= NROUND; r++)
    for (int i = 0; i < NT; i++) {
      wait_eq(&ready[i], r);
      CHECK(pthread_kill(th[i], sigs[i]) == 0, "pthread_kill");
    }
  for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
  pthread_join(w, NULL);
  for (int i = 0; i < NT; i++) {
    uint64_t acc = (uint64_t)i;
    for (int r = 1; r <= NROUND; r++) acc = fixed_work(acc ^ (uint64_t)r);
    CHECK(result[i] == acc, "thread %d: result", i);
    CHECK_EQ(handled[i], NROUND);
    CHECK_EQ(bad_where[i], 0);
    CHECK_EQ(bad_read[i], 0);
    CHECK_EQ(bad_byte[i], 0);
    printf("thread %d (signal %d, %s, %s): %d handlers ran, blocked and returned where they must, result %016llx\n",
           i, sigs[i], onstack[i] ? "SA_ONSTACK" : "no SA_ONSTACK", has_alt[i] ? "sigaltstack" : "no sigaltstack",
           handled[i], (unsigned long long)result[i]);
  }
  return 0;
}
