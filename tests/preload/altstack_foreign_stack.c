// Threads that run code with the stack pointer in memory of their own
// making, as Erlang's JIT runs Erlang code with %rsp inside the process
// heap, and that have a sigaltstack (their signal handlers all
// SA_ONSTACK). Natively no signal ever pushes a frame below such a stack
// pointer; the memory below it belongs to the program (Erlang's heap).
//
// Part 1: 4 threads, each with an alternate signal stack, compute for a
// while on a 16 KiB "foreign" stack at the top of a heap buffer whose rest
// holds a pattern; afterwards the pattern must be intact and the results
// exact. (goshim pushed its preemption signal's frame there, on whatever
// the stack pointer was: beam.smp crashed at once.)
// Part 2: 4 threads with alternate signal stacks compute on their own
// stacks (they may be preempted inside a frame on their alternate stack
// and resumed elsewhere) while the main thread sends each SIGUSR1 50
// times, one at a time (a handshake per signal); the SA_ONSTACK handler
// must run on its own thread's alternate stack; results exact.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT 4
#define ITERS 20000000ul
#define BUF (256 * 1024)
#define FSTACK (16 * 1024)
#define MARGIN 2048
#define ALT (64 * 1024)
#define NSIG_SEND 50

static volatile uint64_t seed[NT];
static uint64_t result[NT];
static __thread int cur;  // the thread compute() works for

// A leaf loop: no calls, next to no stack.
static __attribute__((noinline)) void compute(void) {
  int i = cur;
  uint64_t x = seed[i];
  for (unsigned long k = 0; k < ITERS; k++) x = x * 6364136223846793005ull + 1442695040888963407ull + (x >> 29);
  result[i] = x;
}

static uint64_t expected(int i) {
  uint64_t x = seed[i];
  for (unsigned long k = 0; k < ITERS; k++) x = x * 6364136223846793005ull + 1442695040888963407ull + (x >> 29);
  return x;
}

// Calls fn with the stack pointer at top (16-byte aligned).
static void run_on(void* top, void (*fn)(void)) {
#if defined(__x86_64__)
  __asm__ volatile(
      "mov %%rsp, %%rbx\n\t"
      "mov %0, %%rsp\n\t"
      "call *%1\n\t"
      "mov %%rbx, %%rsp\n\t"
      :
      : "r"(top), "r"(fn)
      : "rbx", "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory", "cc", "xmm0", "xmm1",
        "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
        "xmm14", "xmm15");
#elif defined(__aarch64__)
  __asm__ volatile(
      "mov x19, sp\n\t"
      "mov sp, %0\n\t"
      "blr %1\n\t"
      "mov sp, x19\n\t"
      :
      : "r"(top), "r"(fn)
      : "x19", "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14",
        "x15", "x16", "x17", "x18", "x30", "memory", "cc", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7",
        "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29",
        "v30", "v31");
#else
#error "x86-64 or aarch64"
#endif
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready;

static void set_altstack(void) {
  stack_t ss = {.ss_sp = malloc(ALT), .ss_flags = 0, .ss_size = ALT};
  if (!ss.ss_sp || sigaltstack(&ss, NULL) != 0) {
    perror("sigaltstack");
    exit(1);
  }
}

static void* foreign(void* arg) {
  int i = (int)(intptr_t)arg;
  set_altstack();
  unsigned char* buf = aligned_alloc(64, BUF);
  if (!buf) exit(1);
  memset(buf, 0x5a, BUF);
  cur = i;
  run_on(buf + BUF, compute);
  size_t bad = 0, first = 0;
  for (size_t k = 0; k < BUF - MARGIN; k++)
    if (buf[k] != 0x5a) {
      if (!bad) first = k;
      bad++;
    }
  if (bad) fprintf(stderr, "thread %d: %zu bytes below its stack overwritten (from offset %zu)\n", i, bad, first);
  free(buf);
  return (void*)(uintptr_t)(bad == 0);
}

// ---- part 2 ----
static __thread char* alt_lo;
static __thread int handled, off_alt;
static volatile int nhandled[NT];
static __thread int my;

static void on_usr1(int sig) {
  (void)sig;
  char here;
  if (!(&here >= alt_lo && &here < alt_lo + ALT)) off_alt++;
  handled++;
  __atomic_store_n(&nhandled[my], handled, __ATOMIC_RELEASE);
}

static void* own(void* arg) {
  int i = (int)(intptr_t)arg;
  my = i;
  stack_t ss = {.ss_sp = malloc(ALT), .ss_flags = 0, .ss_size = ALT};
  if (!ss.ss_sp || sigaltstack(&ss, NULL) != 0) exit(1);
  alt_lo = ss.ss_sp;
  pthread_mutex_lock(&mu);
  ready++;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  uint64_t x = seed[i];
  for (int round = 0; round < 4; round++)
    for (unsigned long k = 0; k < ITERS / 2; k++) x = x * 6364136223846793005ull + 1442695040888963407ull + (x >> 29);
  // every signal sent to this thread is handled before it leaves
  while (__atomic_load_n(&nhandled[i], __ATOMIC_ACQUIRE) < NSIG_SEND) sched_yield();
  result[i] = x;
  if (off_alt) fprintf(stderr, "thread %d: %d of %d handlers ran off its alternate stack\n", i, off_alt, handled);
  return (void*)(uintptr_t)(off_alt == 0);
}

int main(void) {
  for (int i = 0; i < NT; i++) seed[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
  pthread_t t[NT];
  int ok = 1;
  for (int i = 0; i < NT; i++) pthread_create(&t[i], NULL, foreign, (void*)(intptr_t)i);
  for (int i = 0; i < NT; i++) {
    void* r;
    pthread_join(t[i], &r);
    if (!r) ok = 0;
    if (result[i] != expected(i)) {
      fprintf(stderr, "thread %d: wrong result on the foreign stack\n", i);
      ok = 0;
    }
  }
  printf("part 1 (computing on a stack of the program's making): %s\n", ok ? "ok" : "FAILED");

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_ONSTACK | SA_RESTART;
  sigaction(SIGUSR1, &sa, NULL);
  int ok2 = 1;
  memset(result, 0, sizeof result);
  for (int i = 0; i < NT; i++) pthread_create(&t[i], NULL, own, (void*)(intptr_t)i);
  pthread_mutex_lock(&mu);
  while (ready < NT) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  for (int n = 1; n <= NSIG_SEND; n++)
    for (int i = 0; i < NT; i++) {
      pthread_kill(t[i], SIGUSR1);
      while (__atomic_load_n(&nhandled[i], __ATOMIC_ACQUIRE) < n) sched_yield();
    }
  for (int i = 0; i < NT; i++) {
    void* r;
    pthread_join(t[i], &r);
    if (!r) ok2 = 0;
    uint64_t x = seed[i];
    for (int round = 0; round < 4; round++)
      for (unsigned long k = 0; k < ITERS / 2; k++) x = x * 6364136223846793005ull + 1442695040888963407ull + (x >> 29);
    if (result[i] != x) {
      fprintf(stderr, "thread %d: wrong result on its own stack\n", i);
      ok2 = 0;
    }
  }
  printf("part 2 (SA_ONSTACK handlers while computing): %s\n", ok2 ? "ok" : "FAILED");
  return ok && ok2 ? 0 : 1;
}
