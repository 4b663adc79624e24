// Threads whose stack pointer runs close to the end of a small stack.
//
// Natively no signal lands on a thread that does not ask for one: a thread
// may compute with its stack pointer a few hundred bytes above its guard.
// (A runtime that pushed its own signal frames there, several KiB with
// AVX-512's xsave area, crashed such a program with SIGSEGV.)
//
// Part 1 (deep): NDEEP threads with 64 KiB stacks (pthread_attr_setstacksize,
// the default guard below) compute a long leaf loop (no calls) with the
// stack pointer about DEEP_MARGIN bytes above the lowest usable byte of
// their stack (pthread_getattr_np), reached with alloca. Results exact.
// Part 2 (turns): NTURN threads (more than the processors it is run with
// here), 64 KiB stacks, compute in leaf loops with the stack pointer about
// TURN_MARGIN bytes above the end of their stack and take turns through a
// shared counter: thread i spins (no calls) until the counter says i, adds
// its share of work and passes the turn on, NROUND rounds. Every turn
// needs the processor to pass from one computing thread to another (a
// handshake, not a timing). Results exact.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <alloca.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

// 64 KiB, or the platform's smallest thread stack where that is larger
// (aarch64: PTHREAD_STACK_MIN is 128 KiB).
#define STACK_WANT (64 * 1024)
#define STACK (STACK_WANT > PTHREAD_STACK_MIN ? STACK_WANT : PTHREAD_STACK_MIN)
#define NDEEP 3
#define DEEP_MARGIN 1536
#define DEEP_ITERS 150000000ul
#define NTURN 4
#define TURN_MARGIN (16 * 1024)
#define NROUND 20
#define TURN_ITERS 2000000ul

static uint64_t deep_seed[NDEEP] = {1, 77, 4242};
static uint64_t deep_result[NDEEP];
static uint64_t turn_result[NTURN];
static volatile unsigned turn;  // whose turn: turn % NTURN
static volatile uint64_t sink;

static inline uint64_t step(uint64_t x) { return x * 6364136223846793005ull + 1442695040888963407ull + (x >> 29); }

// Leaf loops: no calls, next to no stack.
static __attribute__((noinline)) uint64_t deep_loop(uint64_t x) {
  for (unsigned long k = 0; k < DEEP_ITERS; k++) x = step(x);
  return x;
}

static __attribute__((noinline)) uint64_t turn_loop(int i, uint64_t acc) {
  uint64_t spin = 0;
  for (int r = 0; r < NROUND; r++) {
    unsigned want = (unsigned)(r * NTURN + i);
    while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != want) spin = step(spin);
    for (unsigned long k = 0; k < TURN_ITERS; k++) acc = step(acc ^ want);
    __atomic_store_n(&turn, want + 1, __ATOMIC_RELEASE);
  }
  sink = spin;
  return acc;
}

// The lowest usable address of the calling thread's stack.
static uintptr_t stack_lo(void) {
  uintptr_t lo, hi;
  self_stack(&lo, &hi);
  size_t size = hi - lo;
  CHECK(size >= STACK - 4096 && size <= 4 * STACK, "stack size %zu", size);
  return lo;
}

// Calls fn(i) with the stack pointer about margin bytes above the end of
// the stack.
static __attribute__((noinline)) uint64_t at_depth(size_t margin, uint64_t (*fn)(int, uint64_t), int i,
                                                   uint64_t arg) {
  uintptr_t lo = stack_lo();
  char here;
  uintptr_t sp = (uintptr_t)&here;
  CHECK(sp > lo + margin + 256, "stack pointer %#lx too low (end %#lx)", (unsigned long)sp, (unsigned long)lo);
  size_t n = sp - (lo + margin);
  volatile char* p = alloca(n);
  p[0] = 1;  // the lowest byte of the area, just above the margin
  uint64_t r = fn(i, arg);
  sink = p[0];
  return r;
}

static uint64_t deep_fn(int i, uint64_t x) {
  (void)i;
  return deep_loop(x);
}

static uint64_t turn_fn(int i, uint64_t x) { return turn_loop(i, x); }

static void* deep_main(void* arg) {
  int i = (int)(intptr_t)arg;
  deep_result[i] = at_depth(DEEP_MARGIN, deep_fn, i, deep_seed[i]);
  return NULL;
}

static void* turn_main(void* arg) {
  int i = (int)(intptr_t)arg;
  turn_result[i] = at_depth(TURN_MARGIN, turn_fn, i, (uint64_t)i * 1000003u);
  return NULL;
}

static void start(pthread_t* t, void* (*fn)(void*), int i) {
  pthread_attr_t a;
  pthread_attr_init(&a);
  CHECK(pthread_attr_setstacksize(&a, STACK) == 0, "setstacksize");
  CHECK(pthread_create(t, &a, fn, (void*)(intptr_t)i) == 0, "pthread_create");
  pthread_attr_destroy(&a);
}

int main(void) {
  pthread_t d[NDEEP], t[NTURN];
  for (int i = 0; i < NDEEP; i++) start(&d[i], deep_main, i);
  for (int i = 0; i < NTURN; i++) start(&t[i], turn_main, i);
  for (int i = 0; i < NDEEP; i++) pthread_join(d[i], NULL);
  for (int i = 0; i < NTURN; i++) pthread_join(t[i], NULL);

  for (int i = 0; i < NDEEP; i++) {
    uint64_t x = deep_seed[i];
    for (unsigned long k = 0; k < DEEP_ITERS; k++) x = step(x);
    CHECK(deep_result[i] == x, "deep thread %d: %#llx, expected %#llx", i, (unsigned long long)deep_result[i],
          (unsigned long long)x);
    printf("deep %d %016llx\n", i, (unsigned long long)deep_result[i]);
  }
  CHECK_EQ(turn, NROUND * NTURN);
  for (int i = 0; i < NTURN; i++) {
    uint64_t acc = (uint64_t)i * 1000003u;
    for (int r = 0; r < NROUND; r++)
      for (unsigned long k = 0; k < TURN_ITERS; k++) acc = step(acc ^ (unsigned)(r * NTURN + i));
    CHECK(turn_result[i] == acc, "turn thread %d: %#llx, expected %#llx", i, (unsigned long long)turn_result[i],
          (unsigned long long)acc);
    printf("turn %d %016llx\n", i, (unsigned long long)turn_result[i]);
  }
  printf("turns %u\n", turn);
  return 0;
}
