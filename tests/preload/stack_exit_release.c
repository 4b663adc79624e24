/* An exited thread's stack keeps no more than a few pages resident: glibc
 * gives back the pages below the exiting frame (all but PTHREAD_STACK_MIN
 * of them) at the thread's end, before it is joined, whether the stack is
 * then cached or unmapped. Threads that recursed deep therefore cost
 * nothing once they ended (a JVM whose 2,000 threads each hit a
 * StackOverflowError peaked at 150 MB natively).
 *
 * Three shapes, each thread recursing 768 KiB deep (every page written):
 *   - 64 threads with 1 MiB stacks (pthread_attr_setstacksize), alive
 *     together (a barrier), then all exiting and joined;
 *   - the same with the default stack size;
 *   - 32 threads one after the other, each joined before the next starts
 *     (so a later thread may get the stack an earlier one left), sizes
 *     alternating.
 * Right after the joins (no wait), mincore() on each exited thread's stack
 * range (from pthread_getattr_np) must find at most 64 KiB resident on
 * x86-64 (natively 24 KiB for a cached stack, nothing for an unmapped one;
 * 772 KiB under goshim before its goroutines' exits did the same). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common.h"

/* glibc keeps its own PTHREAD_STACK_MIN below the exit frame: 16 KiB on
 * x86-64, 128 KiB on aarch64. */
#ifdef __aarch64__
enum { KEPT = 128 * 1024 };
#else
enum { KEPT = 16 * 1024 };
#endif
enum { N = 64, SEQ = 32, DEPTH = 768 * 1024, CEILING = KEPT + 48 * 1024 };

static long page;
static pthread_barrier_t bar;
static struct range { uintptr_t lo, hi; } stacks[N];
enum { VEC_PAGES = 1 << 16 };
static unsigned char vec[VEC_PAGES];  /* static: no mapping appears after the threads */

/* Writes a byte at both ends of a 1 KiB frame per level, down to `depth`
 * bytes below `top`: every page of that stretch is written. */
static int recurse(uintptr_t top, size_t depth) {
  volatile char buf[1024];
  buf[0] = 1;
  buf[sizeof buf - 1] = 2;
  if (top - (uintptr_t)buf < depth) return recurse(top, depth) + buf[0];
  return buf[sizeof buf - 1];
}

static void own_stack(struct range *r) {
  pthread_attr_t a;
  void *lo;
  size_t sz;
  CHECK_EQ(pthread_getattr_np(pthread_self(), &a), 0);
  CHECK_EQ(pthread_attr_getstack(&a, &lo, &sz), 0);
  pthread_attr_destroy(&a);
  r->lo = (uintptr_t)lo;
  r->hi = (uintptr_t)lo + sz;
}

static void go_deep(void) {
  char here;
  CHECK(recurse((uintptr_t)&here, DEPTH) > 0, "recursion");
}

static void *together(void *arg) {
  own_stack(&stacks[(long)arg]);
  pthread_barrier_wait(&bar);  /* all alive at once: every stack distinct */
  go_deep();
  return NULL;
}

static void *alone(void *arg) {
  own_stack((struct range *)arg);
  go_deep();
  return NULL;
}

/* Resident bytes of [lo, hi); pages no longer mapped count as none. */
static long resident(struct range r) {
  uintptr_t lo = r.lo & ~(uintptr_t)(page - 1);
  size_t n = (r.hi - lo + page - 1) / page;
  CHECK(n <= VEC_PAGES, "stack of %zu pages", n);
  long res = 0;
  if (mincore((void *)lo, n * page, vec) == 0) {
    for (size_t i = 0; i < n; i++) res += vec[i] & 1;
  } else {
    CHECK(errno == ENOMEM, "mincore: %s", strerror(errno));
    for (size_t i = 0; i < n; i++) {
      if (mincore((void *)(lo + i * page), page, vec) == 0)
        res += vec[0] & 1;
      else
        CHECK(errno == ENOMEM, "mincore: %s", strerror(errno));
    }
  }
  return res * page;
}

static void check_exited(const char *what, int i, struct range r) {
  long kb = resident(r) / 1024;
  CHECK(kb * 1024 <= CEILING, "%s: thread %d's exited stack still has %ld KiB resident (ceiling %d)",
        what, i, kb, CEILING / 1024);
}

static void wave(const char *what, const pthread_attr_t *attr) {
  pthread_t t[N];
  CHECK_EQ(pthread_barrier_init(&bar, NULL, N), 0);
  for (long i = 0; i < N; i++) CHECK_EQ(pthread_create(&t[i], attr, together, (void *)i), 0);
  for (int i = 0; i < N; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  for (int i = 0; i < N; i++) check_exited(what, i, stacks[i]);
  CHECK_EQ(pthread_barrier_destroy(&bar), 0);
  printf("%s: %d exited stacks each below %d KiB resident\n", what, N, CEILING / 1024);
}

int main(void) {
  page = sysconf(_SC_PAGESIZE);
  pthread_attr_t mib, dflt;
  size_t dsize;
  CHECK_EQ(pthread_attr_init(&mib), 0);
  CHECK_EQ(pthread_attr_setstacksize(&mib, 1 << 20), 0);
  CHECK_EQ(pthread_getattr_default_np(&dflt), 0);
  CHECK_EQ(pthread_attr_getstacksize(&dflt, &dsize), 0);
  /* 0: glibc's default from RLIMIT_STACK, 2 MiB at least on Linux. */
  if (dsize != 0 && dsize < 2 * DEPTH) {
    fprintf(stderr, "default stack size %zu too small for this test\n", dsize);
    return 77;
  }
  setvbuf(stdout, NULL, _IONBF, 0);  /* stdio allocates nothing later */

  wave("1 MiB stacks together", &mib);
  wave("default stacks together", NULL);

  for (int i = 0; i < SEQ; i++) {
    struct range r;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, i % 2 ? NULL : &mib, alone, &r), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    check_exited("one at a time", i, r);
  }
  printf("one at a time: %d exited stacks each below %d KiB resident\n", SEQ, CEILING / 1024);
  return 0;
}
