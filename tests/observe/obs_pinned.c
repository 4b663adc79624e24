/* A thread that blocks where goshim cannot see it: a read system call
 * issued by an inline syscall instruction (as a static runtime or a JIT
 * would) on an empty pipe made the same way; main, which must keep
 * running meanwhile, ends it. For the pinning report
 * (GOSHIM_DEBUG=pinned=MS).
 *
 *   obs_pinned [odd-stack] [stdin]
 *
 * The reader publishes its kernel thread's id (a raw gettid) just before
 * its read; main waits until that kernel thread sleeps (state S in
 * /proc/self/task/TID/stat: the read has begun), prints "reader blocked",
 * and ends the block: with "stdin", once a byte arrives on its standard
 * input (the test sends it when it has seen what it waits for, so the
 * stall lasts until then however loaded the machine); otherwise about
 * 400 ms later (1 s with odd-stack).
 *
 * With the argument "odd-stack" the blocked thread's stack, right above
 * the system call's stack pointer, holds pairs of words that look like
 * frame records (a saved frame pointer a little higher on the same stack,
 * then a "return address" in a page that cannot be read), as a program's
 * stack may hold any values: the report's backtrace reads this stack while
 * the thread is blocked and must never crash the program. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int pfd[2];
static int reader_tid;
static uintptr_t gone; /* odd-stack: an address in a page that cannot be read */

/* System calls made by a syscall instruction, not through libc. */
static inline __attribute__((always_inline)) long inline_syscall3(long nr, long a, long b, long c) {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}

__attribute__((noinline)) void *stuck_in_raw_read(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "reader");
  volatile uintptr_t odd[64];
  for (int i = 0; gone && i + 1 < 64; i += 2) {
    odd[i] = (uintptr_t)&odd[63];
    odd[i + 1] = gone + 16 + 8 * (uintptr_t)i;
  }
  char c = 0;
  __atomic_store_n(&reader_tid, (int)inline_syscall3(SYS_gettid, 0, 0, 0), __ATOMIC_RELEASE);
  long n = inline_syscall3(SYS_read, pfd[0], (long)&c, 1);
  if (n != 1 || c != 'x') fprintf(stderr, "read returned %ld\n", n);
  int ok = n == 1 && c == 'x' && (!gone || odd[1] == gone + 16);
  return ok ? NULL : (void *)1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The state letter of kernel thread tid of this process, 0 if unknown. */
static char task_state(int tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p[2] : 0;
}

int main(int argc, char **argv) {
  int odd = 0, on_stdin = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "odd-stack") == 0) odd = 1;
    else if (strcmp(argv[i], "stdin") == 0) on_stdin = 1;
    else return 2;
  }
  if (odd) {
    void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    gone = (uintptr_t)p;
  }
  if (inline_syscall3(SYS_pipe2, (long)pfd, 0, 0) != 0) return 1;
  pthread_t t;
  if (pthread_create(&t, NULL, stuck_in_raw_read, NULL) != 0) return 1;
  /* Until the reader's kernel thread sleeps in its read (at most 30 s). */
  double t0 = now_s();
  int tid;
  while (!(tid = __atomic_load_n(&reader_tid, __ATOMIC_ACQUIRE)) || task_state(tid) != 'S') {
    if (now_s() - t0 > 30) {
      fprintf(stderr, "the reader's kernel thread %d never slept\n", tid);
      return 1;
    }
    sched_yield();
  }
  printf("reader blocked\n");
  fflush(stdout);
  if (on_stdin) {
    char b;
    if (read(0, &b, 1) != 1) return 1;
  } else {
    struct timespec ts = {odd ? 1 : 0, odd ? 0 : 400 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  printf("main ran\n");
  fflush(stdout);
  if (write(pfd[1], "x", 1) != 1) return 1;
  void *r;
  pthread_join(t, &r);
  printf("joined %s\n", r ? "bad" : "ok");
  return r != NULL;
}
