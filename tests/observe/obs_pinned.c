/* A thread that blocks where goshim cannot see it: a read system call
 * issued by an inline syscall instruction (as a static runtime or a JIT
 * would) on an empty pipe made the same way; main, which must keep
 * running meanwhile, ends it after about 400 ms. For the pinning report
 * (GOSHIM_DEBUG=pinned=MS).
 *
 * With the argument "odd-stack" the blocked thread's stack, right above
 * the system call's stack pointer, holds pairs of words that look like
 * frame records (a saved frame pointer a little higher on the same stack,
 * then a "return address" in a page that cannot be read), as a program's
 * stack may hold any values, and main waits about a second: the report's
 * backtrace reads this stack while the thread is blocked and must never
 * crash the program. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int pfd[2];
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
  long n = inline_syscall3(SYS_read, pfd[0], (long)&c, 1);
  if (n != 1 || c != 'x') fprintf(stderr, "read returned %ld\n", n);
  int ok = n == 1 && c == 'x' && (!gone || odd[1] == gone + 16);
  return ok ? NULL : (void *)1;
}

int main(int argc, char **argv) {
  int odd = argc > 1 && strcmp(argv[1], "odd-stack") == 0;
  if (odd) {
    void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    gone = (uintptr_t)p;
  }
  if (inline_syscall3(SYS_pipe2, (long)pfd, 0, 0) != 0) return 1;
  pthread_t t;
  pthread_create(&t, NULL, stuck_in_raw_read, NULL);
  struct timespec ts = {odd ? 1 : 0, odd ? 0 : 400 * 1000 * 1000};
  nanosleep(&ts, NULL);
  printf("main ran\n");
  fflush(stdout);
  if (write(pfd[1], "x", 1) != 1) return 1;
  void *r;
  pthread_join(t, &r);
  printf("joined %s\n", r ? "bad" : "ok");
  return r != NULL;
}
