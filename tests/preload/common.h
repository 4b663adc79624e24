/* Helpers for the integration test programs. These programs know nothing
 * of goshim: they are ordinary pthread programs that check their own
 * results and exit 0 on success. The runner (tests/run_preload.sh) runs
 * each natively and under LD_PRELOAD=libgoshim.so.
 *
 * MAX_KERNEL_THREADS: when set (the runner sets it under goshim), the
 * program also checks that the process never needed more kernel threads
 * than that while its many threads were alive. */
#ifndef TESTS_PRELOAD_COMMON_H
#define TESTS_PRELOAD_COMMON_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* Evaluates a and b once (they may be calls with side effects). */
#define CHECK_EQ(a, b)                                                       \
  do {                                                                       \
    long check_a_ = (long)(a), check_b_ = (long)(b);                         \
    if (check_a_ != check_b_) {                                              \
      fprintf(stderr, "FAIL %s:%d: %s == %s: %s = %ld, %s = %ld\n", __FILE__, \
              __LINE__, #a, #b, #a, check_a_, #b, check_b_);                 \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

/* Kernel threads of this process right now (/proc/self/status). */
static inline int kernel_threads(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
  fclose(f);
  return n;
}

/* Fails if MAX_KERNEL_THREADS is set and exceeded. Returns the count. */
static inline int check_kernel_threads(const char *when) {
  int n = kernel_threads();
  const char *lim = getenv("MAX_KERNEL_THREADS");
  if (lim && *lim) {
    int max = atoi(lim);
    CHECK(n <= max, "%s: %d kernel threads, at most %d expected", when, n, max);
  }
  return n;
}

static inline int env_int(const char *name, int dflt) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : dflt;
}

#endif
