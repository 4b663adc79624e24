/* pthread_setaffinity_np / pthread_getaffinity_np as the kernel answers them
 * (sched_setaffinity, sched_getaffinity; glibc passes the call through):
 *   - a set naming no active CPU is EINVAL: each CPU past the configured
 *     ones alone up to CPU_SETSIZE-1 (twice each), only the last CPU of a
 *     2048-CPU set (the kernel cuts a longer set to its own mask size), the
 *     empty set; each call with the stack below it dirtied (0xff) first, so
 *     that a callee's uninitialised cpu_set_t reads as all CPUs;
 *   - the current mask, one CPU of it, and a one-word set are accepted
 *     (the thread's mask is put back after each);
 *   - get: the bytes past the kernel's mask are zeroed (the buffer is
 *     dirtied first), the mask is the one the thread started with (main's
 *     own, another thread's, a sizeof(long) buffer, a 256-byte one); a size
 *     that is not a multiple of sizeof(long) is EINVAL;
 *   - with the process narrowed to one CPU (sched_setaffinity, then exec of
 *     itself), a set naming only another CPU the process was allowed is
 *     accepted: the kernel checks the cpuset, not the current mask.
 * All from the main thread and from a second thread.
 * (goshim before the fix read the calling kernel thread's mask into an
 * uninitialised cpu_set_t and tested 128 bytes of it: a nonexistent CPU was
 * accepted 4 times in 5, and a CPU outside the current mask refused.) */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"

static cpu_set_t start_mask; /* the main thread's mask at start */
static int ncpus_conf;
static long kmask_bytes; /* the kernel's mask size (sched_getaffinity's result) */
static int other_cpu = -1; /* narrowed run: a CPU allowed before narrowing */

__attribute__((noinline)) static void dirty(void) {
  volatile unsigned char buf[16384];
  memset((void *)buf, 0xff, sizeof buf);
}

/* A set of CPU_SETSIZE CPUs on the stack (no allocation between the dirtying
   and the call), or an allocated one of setsize CPUs. */
__attribute__((noinline)) static int set_only(int cpu, int setsize) {
  if (setsize == CPU_SETSIZE) {
    cpu_set_t s;
    CPU_ZERO(&s);
    if (cpu >= 0) CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
  }
  size_t sz = CPU_ALLOC_SIZE(setsize);
  cpu_set_t *s = CPU_ALLOC(setsize);
  CHECK(s != NULL, "CPU_ALLOC");
  CPU_ZERO_S(sz, s);
  if (cpu >= 0) CPU_SET_S(cpu, sz, s);
  int r = pthread_setaffinity_np(pthread_self(), sz, s);
  CPU_FREE(s);
  return r;
}

static void expect_einval(int cpu, int setsize, int tries, const char *what) {
  for (int i = 0; i < tries; i++) {
    dirty();
    int r = set_only(cpu, setsize);
    CHECK(r == EINVAL, "%s (CPU %d): pthread_setaffinity_np = %d (%s), try %d, expected EINVAL", what, cpu, r,
          r ? strerror(r) : "accepted", i);
  }
}

static void restore(void) { CHECK_EQ(pthread_setaffinity_np(pthread_self(), sizeof start_mask, &start_mask), 0); }

static void check_get(pthread_t t, const char *who) {
  cpu_set_t s;
  memset(&s, 0xff, sizeof s);
  CHECK_EQ(pthread_getaffinity_np(t, sizeof s, &s), 0);
  CHECK(CPU_EQUAL(&s, &start_mask), "%s: pthread_getaffinity_np is not the start mask", who);

  unsigned char big[256];
  memset(big, 0xff, sizeof big);
  CHECK_EQ(pthread_getaffinity_np(t, sizeof big, (cpu_set_t *)big), 0);
  CHECK(memcmp(big, &start_mask, sizeof start_mask) == 0, "%s: 256-byte get differs", who);
  for (size_t i = sizeof start_mask; i < sizeof big; i++)
    CHECK(big[i] == 0, "%s: byte %zu past the mask is %d", who, i, big[i]);

  if (kmask_bytes <= (long)sizeof(long)) { /* the kernel's mask fits in one word */
    unsigned long w = ~0ul;
    CHECK_EQ(pthread_getaffinity_np(t, sizeof w, (cpu_set_t *)&w), 0);
    CHECK(memcmp(&w, &start_mask, sizeof w) == 0, "%s: one-word get differs", who);
  }
  unsigned char odd[12];
  CHECK_EQ(pthread_getaffinity_np(t, sizeof odd, (cpu_set_t *)odd), EINVAL);
}

static void checks(pthread_t main_thread, const char *who) {
  check_get(pthread_self(), who);
  check_get(main_thread, who);

  /* Every CPU past the configured ones, alone (which byte of a callee's
     uninitialised set holds garbage depends on its frame). */
  for (int c = ncpus_conf; c < CPU_SETSIZE; c++) expect_einval(c, CPU_SETSIZE, 2, "only a CPU past the configured");
  if (ncpus_conf < CPU_SETSIZE) expect_einval(CPU_SETSIZE - 1, CPU_SETSIZE, 20, "only CPU_SETSIZE-1");
  if (ncpus_conf < 2048) expect_einval(2047, 2048, 20, "only CPU 2047 of 2048");
  expect_einval(-1, CPU_SETSIZE, 20, "the empty set");

  /* accepted */
  CHECK_EQ(pthread_setaffinity_np(pthread_self(), sizeof start_mask, &start_mask), 0);
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &start_mask)) first++;
  CHECK(first < CPU_SETSIZE, "empty start mask");
  dirty();
  CHECK_EQ(set_only(first, CPU_SETSIZE), 0);
  restore();
  if (first < 64) {
    unsigned long w = 1ul << first;
    CHECK_EQ(pthread_setaffinity_np(pthread_self(), sizeof w, (cpu_set_t *)&w), 0);
    restore();
  }
  if (other_cpu >= 0) { /* outside the current mask, allowed by the cpuset */
    dirty();
    int r = set_only(other_cpu, CPU_SETSIZE);
    CHECK(r == 0, "%s: only CPU %d (outside the narrowed mask, allowed before): %d (%s)", who, other_cpu, r,
          strerror(r));
    restore();
  }
  check_get(pthread_self(), who);
}

static pthread_t main_thread;

static void *second(void *arg) {
  checks(main_thread, "second thread");
  return arg;
}

int main(int argc, char **argv) {
  (void)argc;
  ncpus_conf = (int)sysconf(_SC_NPROCESSORS_CONF);
  CHECK(ncpus_conf >= 1, "sysconf");
  {
    unsigned long buf[1024 / sizeof(unsigned long)];
    kmask_bytes = syscall(SYS_sched_getaffinity, 0, sizeof buf, buf);
    CHECK(kmask_bytes > 0, "sched_getaffinity: %s", strerror(errno));
  }
  const char *o = getenv("AFFINITY_OTHER_CPU");
  if (!o) {
    /* First run: narrow the process to its first CPU and exec itself, so
     * that every kernel thread starts with that mask; the second CPU it
     * was allowed is the one to ask for. With one CPU, no narrowed run. */
    cpu_set_t s;
    CPU_ZERO(&s);
    CHECK(syscall(SYS_sched_getaffinity, 0, sizeof s, &s) > 0, "sched_getaffinity");
    int a = 0, b;
    while (a < CPU_SETSIZE && !CPU_ISSET(a, &s)) a++;
    b = a + 1;
    while (b < CPU_SETSIZE && !CPU_ISSET(b, &s)) b++;
    if (b < CPU_SETSIZE) {
      char v[32];
      snprintf(v, sizeof v, "%d:%d:0", a, b);
      setenv("AFFINITY_OTHER_CPU", v, 1);
      CPU_ZERO(&s);
      CPU_SET(a, &s);
      CHECK(syscall(SYS_sched_setaffinity, 0, sizeof s, &s) == 0, "sched_setaffinity: %s", strerror(errno));
      fflush(stdout);
      execv("/proc/self/exe", argv);
      CHECK(0, "exec: %s", strerror(errno));
    }
  } else {
    /* The narrowed run. Under an M:N runtime the exec may have run on
     * another kernel thread than the one narrowed: narrow and exec again
     * (natively the first exec is narrowed). */
    int a, b, tries;
    CHECK(sscanf(o, "%d:%d:%d", &a, &b, &tries) == 3, "AFFINITY_OTHER_CPU=%s", o);
    cpu_set_t s;
    CPU_ZERO(&s);
    CHECK(syscall(SYS_sched_getaffinity, 0, sizeof s, &s) > 0, "sched_getaffinity");
    if (CPU_COUNT(&s) != 1 || !CPU_ISSET(a, &s)) {
      CHECK(tries < 50, "not narrowed to CPU %d after %d execs", a, tries);
      char v[32];
      snprintf(v, sizeof v, "%d:%d:%d", a, b, tries + 1);
      setenv("AFFINITY_OTHER_CPU", v, 1);
      CPU_ZERO(&s);
      CPU_SET(a, &s);
      CHECK(syscall(SYS_sched_setaffinity, 0, sizeof s, &s) == 0, "sched_setaffinity: %s", strerror(errno));
      execv("/proc/self/exe", argv);
      CHECK(0, "exec: %s", strerror(errno));
    }
    other_cpu = b;
  }

  CPU_ZERO(&start_mask);
  CHECK_EQ(sched_getaffinity(0, sizeof start_mask, &start_mask), 0);
  main_thread = pthread_self();
  checks(main_thread, "main thread");
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, second, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("affinity: nonexistent CPUs refused, masks as the kernel's%s\n",
         other_cpu >= 0 ? ", a CPU outside the narrowed mask accepted" : "");
  return 0;
}
