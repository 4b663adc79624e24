/* A thread blocked where goshim cannot see it (an inline read system call
 * on an empty pipe, as obs_pinned), whose stack right above the system
 * call's stack pointer holds a pair of words that look like a frame record
 * (a saved frame pointer a little higher on the same stack, then a
 * "return address") whose return address points into a page that cannot
 * be read (PROT_NONE): a program's stack holds any values. Main ends the block after
 * about a second. For GOSHIM_DEBUG=pinned=MS: the report's backtrace reads
 * this stack while the thread is blocked, and reading it must never crash
 * the program. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int pfd[2];
static uintptr_t gone; /* an address in a page that cannot be read */

static inline __attribute__((always_inline)) long inline_syscall3(long nr, long a, long b, long c) {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}

__attribute__((noinline)) void *stuck_with_odd_stack(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "reader");
  /* Every slot: a "saved frame pointer" (an aligned address above it on
   * this stack) followed by a "return address" in the unmapped page. */
  volatile uintptr_t odd[64];
  for (int i = 0; i + 1 < 64; i += 2) {
    odd[i] = (uintptr_t)&odd[63];
    odd[i + 1] = gone + 16 + 8 * (uintptr_t)i;
  }
  char c = 0;
  long n = inline_syscall3(SYS_read, pfd[0], (long)&c, 1);
  if (n != 1 || c != 'x') fprintf(stderr, "read returned %ld\n", n);
  return (n == 1 && c == 'x' && odd[1] == gone + 16) ? NULL : (void *)1;
}

int main(void) {
  void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 1;
  gone = (uintptr_t)p;
  if (inline_syscall3(SYS_pipe2, (long)pfd, 0, 0) != 0) return 1;
  pthread_t t;
  pthread_create(&t, NULL, stuck_with_odd_stack, NULL);
  struct timespec ts = {1, 0};
  nanosleep(&ts, NULL);
  printf("main ran\n");
  fflush(stdout);
  if (write(pfd[1], "x", 1) != 1) return 1;
  void *r;
  pthread_join(t, &r);
  printf("joined %s\n", r ? "bad" : "ok");
  return r != NULL;
}
