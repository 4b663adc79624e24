/* A thread that blocks where goshim cannot see it, for about 400 ms: a
 * read system call issued by an inline syscall instruction (as a static
 * runtime or a JIT would) on an empty pipe made the same way; main, which must keep running
 * meanwhile, ends it. For the pinning report (GOSHIM_DEBUG=pinned=MS). */
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int pfd[2];

/* System calls made by a syscall instruction, not through libc. */
static long inline_syscall3(long nr, long a, long b, long c) {
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "0"(nr), "D"(a), "S"(b), "d"(c)
                   : "rcx", "r11", "memory");
  return ret;
}

__attribute__((noinline)) void *stuck_in_raw_read(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "reader");
  char c = 0;
  long n = inline_syscall3(SYS_read, pfd[0], (long)&c, 1);
  if (n != 1 || c != 'x') fprintf(stderr, "read returned %ld\n", n);
  return n == 1 && c == 'x' ? NULL : (void *)1;
}

int main(void) {
  if (inline_syscall3(SYS_pipe2, (long)pfd, 0, 0) != 0) return 1;
  pthread_t t;
  pthread_create(&t, NULL, stuck_in_raw_read, NULL);
  struct timespec ts = {0, 400 * 1000 * 1000};
  nanosleep(&ts, NULL);
  printf("main ran\n");
  fflush(stdout);
  if (write(pfd[1], "x", 1) != 1) return 1;
  void *r;
  pthread_join(t, &r);
  printf("joined %s\n", r ? "bad" : "ok");
  return r != NULL;
}
