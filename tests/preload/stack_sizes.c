/* Threads whose stack size the program sets (pthread_attr_setstacksize,
 * as MariaDB does for its connections) cost no more memory than threads
 * of the default size, and each still has a guard right below the size it
 * asked for, whatever sizes the threads before it had.
 *
 * Memory: for X = 0, 256, ..., 4096 bytes, THREADS threads of the default
 * size and THREADS of 296 KiB each write X bytes on their stack and wait.
 * Once every count of resident pages is stable, the pages each thread
 * holds (mincore over its stack as pthread_getattr_np reports it, and
 * over the 64 KiB below the page of its TCB, pthread_self(), up to that
 * page - above it on aarch64 -: its static TLS block) are compared per
 * kind: for each X the fewest any of its THREADS threads holds, summed
 * over X (a thread that took a signal frame on its stack holds a few more
 * whatever its size): the 296 KiB threads must not hold more. (A kernel
 * thread's first stack frames share a page with its static TLS whatever
 * its stack size, so natively the sums are equal.)
 *
 * Guards: threads of 296 KiB, 64 KiB (the minimum if larger), the default size, 1 MiB, 296 KiB,
 * the default size and 296 KiB, one after the other (each may reuse the
 * last one's memory), first write their stack down to 64 KiB above its
 * reported low end (no guard of an earlier thread is left inside it), then
 * recurse until they overflow: the SIGSEGV handler, on an alternate signal
 * stack, checks that the fault lies within one guard of the reported low
 * end and siglongjmps back. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define THREADS 4
#define NX 17 /* X = 0, 256, ..., 4096 */
#define CUSTOM (296 * 1024)

static __thread int tls_var;

/* ---- memory ---- */

struct rec {
  pthread_t t;
  int x;
  void *tls;
};
static struct rec recs[2][NX * THREADS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t in_cv = PTHREAD_COND_INITIALIZER;
static int checked_in, released;

__attribute__((noinline)) static void write_stack(int x) {
  char buf[x + 1];
  volatile char *b = buf;
  for (int i = 0; i <= x; i++) b[i] = (char)i;
}

static void *waiter(void *arg) {
  struct rec *r = arg;
  write_stack(r->x);
  tls_var = 1;
  r->tls = &tls_var;
  pthread_mutex_lock(&mu);
  checked_in++;
  pthread_cond_signal(&in_cv);
  while (!released) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static uintptr_t page_of(const void *p) {
  return (uintptr_t)p & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
}

static int resident(uintptr_t page) {
  unsigned char v;
  return mincore((void *)page, 1, &v) == 0 && (v & 1);
}

/* The resident pages of one thread: its reported stack, and the 64 KiB
 * below its TCB's page up to that page (its static TLS block, wherever the
 * stack lies), each page once. */
static long thread_pages(const struct rec *r) {
  pthread_attr_t a;
  void *lo;
  size_t size;
  CHECK_EQ(pthread_getattr_np(r->t, &a), 0);
  CHECK_EQ(pthread_attr_getstack(&a, &lo, &size), 0);
  pthread_attr_destroy(&a);
  long ps = sysconf(_SC_PAGESIZE);
  uintptr_t s_lo = page_of(lo), s_hi = page_of((char *)lo + size - 1) + ps;
#if defined(__aarch64__)
  /* TLS variant I: the static TLS block lies above the thread pointer. */
  uintptr_t w_lo = page_of((void *)r->t), w_hi = w_lo + 64 * 1024 + ps;
#else
  /* TLS variant II: below it. */
  uintptr_t w_hi = page_of((void *)r->t) + ps, w_lo = w_hi - 64 * 1024 - ps;
#endif
  CHECK(page_of(r->tls) >= w_lo && page_of(r->tls) < w_hi, "TLS at %p, TCB at %#lx", r->tls,
        (unsigned long)r->t);
  size_t n = (s_hi - s_lo) / ps;
  unsigned char *v = malloc(n);
  CHECK(v != NULL, "malloc");
  CHECK_EQ(mincore((void *)s_lo, s_hi - s_lo, v), 0);
  long pages = 0;
  for (size_t i = 0; i < n; i++) pages += v[i] & 1;
  free(v);
  for (uintptr_t p = w_lo; p < w_hi; p += ps)
    if (p < s_lo || p >= s_hi) pages += resident(p);
  return pages;
}

static void memory_part(void) {
  pthread_attr_t custom;
  pthread_attr_init(&custom);
  CHECK_EQ(pthread_attr_setstacksize(&custom, CUSTOM), 0);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < NX * THREADS; i++) {
      struct rec *r = &recs[k][i];
      r->x = (i % NX) * 256;
      CHECK_EQ(pthread_create(&r->t, k ? &custom : NULL, waiter, r), 0);
    }
  pthread_attr_destroy(&custom);
  pthread_mutex_lock(&mu);
  while (checked_in < 2 * NX * THREADS) pthread_cond_wait(&in_cv, &mu);
  pthread_mutex_unlock(&mu);
  /* Every thread has checked in; the counts settle once each is asleep in
   * pthread_cond_wait (its last frames written). */
  long sum[2] = {0, 0}, prev[2] = {-1, -1};
  int stable = 0;
  for (int round = 0; round < 1000 && stable < 3; round++) {
    struct timespec d = {0, 20 * 1000 * 1000};
    nanosleep(&d, NULL);
    for (int k = 0; k < 2; k++) {
      sum[k] = 0;
      for (int i = 0; i < NX * THREADS; i++) sum[k] += thread_pages(&recs[k][i]);
    }
    stable = sum[0] == prev[0] && sum[1] == prev[1] ? stable + 1 : 0;
    prev[0] = sum[0];
    prev[1] = sum[1];
  }
  CHECK(stable >= 3, "the page counts did not settle");
  /* Per X, the fewest pages any of its THREADS threads holds, summed over
   * X: a thread that took a signal frame on its stack (goshim's preemption
   * of a thread kept from running by a loaded machine, which sysmon sees
   * as running long) holds a few pages more, whatever its stack size; the
   * others of its X show what the size costs. */
  long least[2] = {0, 0};
  for (int k = 0; k < 2; k++)
    for (int x = 0; x < NX; x++) {
      long m = -1;
      for (int i = x; i < NX * THREADS; i += NX) {
        long n = thread_pages(&recs[k][i]);
        if (m < 0 || n < m) m = n;
      }
      least[k] += m;
    }
  if (getenv("STACK_SIZES_VERBOSE"))
    fprintf(stderr, "pages: default %ld, custom %ld; least per size: default %ld, custom %ld\n",
            sum[0], sum[1], least[0], least[1]);
  CHECK(least[1] <= least[0],
        "threads of %d KiB hold %ld resident pages, as many of the default size %ld (the least of "
        "%d per X, summed over %d X)", CUSTOM / 1024, least[1], least[0], THREADS, NX);
  pthread_mutex_lock(&mu);
  released = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < NX * THREADS; i++) CHECK_EQ(pthread_join(recs[k][i].t, NULL), 0);
  printf("threads of %d KiB: no more resident pages than threads of the default size\n",
         CUSTOM / 1024);
}

/* ---- guards ---- */

static uintptr_t stack_lo;
static size_t guard_size;
static sigjmp_buf back;
static volatile int phase; /* 1: filling (a fault is a failure), 2: overflowing */
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
  fault_ok = phase == 2 && a >= stack_lo - guard_size && a < stack_lo + guard_size;
  siglongjmp(back, 1);
}

__attribute__((noinline)) static int recurse(volatile char *prev, int depth) {
  volatile char frame[256];
  frame[0] = (char)depth;
  frame[255] = prev ? prev[0] : 0;
  return recurse(frame, depth + 1) + frame[1];
}

/* Writes 1 KiB frames down to `until`. */
__attribute__((noinline)) static int fill(uintptr_t until, int depth) {
  volatile char frame[1024];
  frame[0] = (char)depth;
  frame[1023] = (char)depth;
  if ((uintptr_t)frame <= until) return frame[0];
  return fill(until, depth + 1) + frame[1023];
}

static void *overflow(void *arg) {
  size_t *asked = arg;
  pthread_attr_t a;
  CHECK_EQ(pthread_getattr_np(pthread_self(), &a), 0);
  void *lo;
  size_t size;
  CHECK_EQ(pthread_attr_getstack(&a, &lo, &size), 0);
  CHECK_EQ(pthread_attr_getguardsize(&a, &guard_size), 0);
  pthread_attr_destroy(&a);
  CHECK(guard_size > 0, "no guard reported");
  CHECK(*asked == 0 || size >= *asked, "asked for %zu bytes of stack, got %zu", *asked, size);
  stack_lo = (uintptr_t)lo;
  stack_t ss = {malloc(256 * 1024), 0, 256 * 1024};
  CHECK(ss.ss_sp != NULL, "malloc");
  CHECK_EQ(sigaltstack(&ss, NULL), 0);
  phase = 1;
  if (sigsetjmp(back, 1) == 0) {
    fill(stack_lo + 64 * 1024, 0);
    phase = 2;
    recurse(NULL, 0);
    fprintf(stderr, "FAIL: the recursion returned\n");
    exit(1);
  }
  stack_t off = {NULL, SS_DISABLE, 0};
  CHECK_EQ(sigaltstack(&off, NULL), 0);
  free(ss.ss_sp);
  return NULL;
}

static void guard_part(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
  static size_t sizes[] = {CUSTOM, 64 * 1024, 0, 1024 * 1024, CUSTOM, 0, CUSTOM};
  long min = sysconf(_SC_THREAD_STACK_MIN); /* 128 KiB on aarch64 */
  if (min > 64 * 1024) sizes[1] = (size_t)min;
  for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    if (sizes[i]) CHECK_EQ(pthread_attr_setstacksize(&a, sizes[i]), 0);
    fault_ok = 0;
    phase = 0;
    int before = faults;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, &a, overflow, &sizes[i]), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    pthread_attr_destroy(&a);
    CHECK(faults == before + 1, "stack of %zu: %d faults", sizes[i], faults - before);
    CHECK(fault_ok, "stack of %zu: fault at %#lx while %s, stack from %#lx, guard %zu", sizes[i],
          (unsigned long)fault_addr, phase == 1 ? "writing the stack" : "overflowing",
          (unsigned long)stack_lo, guard_size);
    if (sizes[i])
      printf("stack of %zu KiB: guard hit\n", sizes[i] / 1024);
    else
      printf("default stack: guard hit\n");
  }
}

int main(void) {
  memory_part();
  guard_part();
  return 0;
}
