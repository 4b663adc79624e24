/* Every thread's stack has its guard, however many threads came before:
 * with 8, 40, 100 and 300 threads alive (default attributes, so each new
 * one gets a stack never used before), one more thread recurses until it
 * overflows its stack. Its SIGSEGV handler, on an alternate signal stack,
 * checks that the fault hit the guard right below that thread's own stack
 * (pthread_getattr_np), not memory further down (another thread's TLS or
 * stack, or a guard further away), and siglongjmps back; the thread then
 * waits with the others. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>
#include "common.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;

static void wait_done(void) {
  pthread_mutex_lock(&mu);
  while (!done) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
}

static void *parked(void *arg) {
  wait_done();
  return arg;
}

/* The overflowing thread's stack and guard, read by the handler. */
static uintptr_t stack_lo;
static size_t guard_size;
static sigjmp_buf back;
static volatile int fault_ok, faults;
static volatile uintptr_t fault_addr;

static void on_segv(int sig, siginfo_t *si, void *uc) {
  (void)sig, (void)uc;
  uintptr_t a = (uintptr_t)si->si_addr;
  fault_addr = a;
  faults++;
  /* glibc counts the guard in the reported stack (its lowest bytes),
   * goshim reports the usable stack with the guard below it: either way
   * the fault lies within one guard of the reported low end. */
  fault_ok = a >= stack_lo - guard_size && a < stack_lo + guard_size;
  siglongjmp(back, 1);
}

__attribute__((noinline)) static int recurse(volatile char *prev, int depth) {
  volatile char frame[256];
  frame[0] = (char)depth;
  frame[255] = prev ? prev[0] : 0;
  return recurse(frame, depth + 1) + frame[1];
}

static void *overflow(void *arg) {
  (void)arg;
  pthread_attr_t a;
  CHECK_EQ(pthread_getattr_np(pthread_self(), &a), 0);
  void *lo;
  size_t size;
  CHECK_EQ(pthread_attr_getstack(&a, &lo, &size), 0);
  CHECK_EQ(pthread_attr_getguardsize(&a, &guard_size), 0);
  pthread_attr_destroy(&a);
  CHECK(guard_size > 0, "no guard reported");
  stack_lo = (uintptr_t)lo;
  stack_t ss = {malloc(256 * 1024), 0, 256 * 1024};
  CHECK(ss.ss_sp != NULL, "malloc");
  CHECK_EQ(sigaltstack(&ss, NULL), 0);
  if (sigsetjmp(back, 1) == 0) {
    recurse(NULL, 0);
    fprintf(stderr, "FAIL: the recursion returned\n");
    exit(1);
  }
  stack_t off = {NULL, SS_DISABLE, 0};
  CHECK_EQ(sigaltstack(&off, NULL), 0);
  free(ss.ss_sp);
  return NULL;
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
  static const int upto[] = {8, 40, 100, 300};
  enum { kMax = 300 + 4 };
  pthread_t t[kMax];
  int n = 0;
  for (unsigned r = 0; r < sizeof upto / sizeof upto[0]; r++) {
    while (n < upto[r]) {
      CHECK_EQ(pthread_create(&t[n], NULL, parked, NULL), 0);
      n++;
    }
    fault_ok = 0;
    int before = faults;
    pthread_t o;
    CHECK_EQ(pthread_create(&o, NULL, overflow, NULL), 0);
    CHECK_EQ(pthread_join(o, NULL), 0);
    CHECK(faults == before + 1, "after %d threads: %d faults", upto[r], faults - before);
    CHECK(fault_ok, "after %d threads: fault at %#lx, stack from %#lx, guard %zu", upto[r],
          (unsigned long)fault_addr, (unsigned long)stack_lo, guard_size);
    printf("overflow after %d threads: guard hit\n", upto[r]);
  }
  pthread_mutex_lock(&mu);
  done = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < n; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  return 0;
}
