/* A credential change while the process has a kernel thread that the
 * threads library did not create (a raw clone, as a JIT or a statically
 * linked runtime makes) and that blocks every signal. glibc's setresuid
 * signals only the threads it created, waits for each of them, and so
 * returns: the raw thread is neither signalled nor waited for. The raw
 * thread blocks all signals before it can run at all (the parent blocks
 * them around the clone with a raw system call), says it is ready by
 * writing to a pipe, and sleeps reading another until main lets it go; it
 * makes only raw system calls (it has no thread pointer of its own). Main
 * checks in /proc that the thread blocks every signal, changes credentials
 * to what they already are (setresuid and setresgid, and setgroups when
 * root: allowed without privileges), which must succeed and return, then
 * lets the raw thread exit and waits until /proc no longer lists it. */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"

static int ready_pipe[2]; /* raw thread -> main: it blocks every signal */
static int go_pipe[2];    /* main -> raw thread: exit */
static volatile int child_tid;

#if defined(__x86_64__)
static inline long raw6(long nr, long a, long b, long c, long d, long e, long f) {
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}
#elif defined(__aarch64__)
static inline long raw6(long nr, long a, long b, long c, long d, long e, long f) {
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc #0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
}
#else
#error "setxid_rawclone: no raw system call for this architecture"
#endif

/* The raw thread: raw system calls only. */
static void raw_thread(void) {
  uint64_t all = ~0ull;
  raw6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, 0, 8, 0, 0); /* already all blocked */
  char c = 'r';
  raw6(SYS_write, ready_pipe[1], (long)&c, 1, 0, 0, 0);
  while (raw6(SYS_read, go_pipe[0], (long)&c, 1, 0, 0, 0) != 1) {
  }
  raw6(SYS_exit, 0, 0, 0, 0, 0, 0);
  for (;;) {
  }
}

/* clone(2) by hand: the child starts on its own stack in raw_thread. */
#if defined(__x86_64__)
/* clone(flags, stack, parent_tid, child_tid, tls); the child's stack top
 * as a call would leave it (a return address's worth below 16-aligned). */
#define STACK_TOP(top) ((top) - 8)
static long raw_clone(unsigned long flags, void *stack_top) {
  long ret;
  register long r10 __asm__("r10") = (long)&child_tid;
  register long r8 __asm__("r8") = 0;
  register void (*r9)(void) __asm__("r9") = raw_thread;
  __asm__ volatile(
      "syscall\n\t"
      "test %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xor %%ebp, %%ebp\n\t"
      "call *%%r9\n\t"
      "hlt\n"
      "1:\n\t"
      : "=a"(ret)
      : "0"((long)SYS_clone), "D"(flags), "S"(stack_top), "d"(&child_tid), "r"(r10), "r"(r8),
        "r"(r9)
      : "rcx", "r11", "memory");
  return ret;
}
#elif defined(__aarch64__)
/* clone(flags, stack, parent_tid, tls, child_tid); sp 16-aligned. The
 * kernel returns with every register but x0 as it was, so the child finds
 * raw_thread in x9. */
#define STACK_TOP(top) (top)
static long raw_clone(unsigned long flags, void *stack_top) {
  register long x8 __asm__("x8") = SYS_clone;
  register long x0 __asm__("x0") = (long)flags;
  register long x1 __asm__("x1") = (long)stack_top;
  register long x2 __asm__("x2") = (long)&child_tid;
  register long x3 __asm__("x3") = 0;
  register long x4 __asm__("x4") = (long)&child_tid;
  register void (*x9)(void) __asm__("x9") = raw_thread;
  __asm__ volatile(
      "svc #0\n\t"
      "cbnz x0, 1f\n\t"
      "mov x29, #0\n\t"
      "mov x30, #0\n\t"
      "blr x9\n\t"
      "brk #0\n"
      "1:\n\t"
      : "+r"(x0)
      : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x9)
      : "x30", "memory");
  return x0;
}
#endif

static int blocks_everything(long tid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "open %s: %s", path, strerror(errno));
  int all = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "SigBlk:", 7) == 0) {
      unsigned long long m = strtoull(line + 7, NULL, 16);
      all = m == (~0ull & ~(1ull << (SIGKILL - 1)) & ~(1ull << (SIGSTOP - 1)));
    }
  fclose(f);
  return all;
}

int main(void) {
  size_t sz = 64 * 1024;
  char *stack = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(stack != MAP_FAILED, "mmap");
  CHECK_EQ(pipe(ready_pipe), 0);
  CHECK_EQ(pipe(go_pipe), 0);
  uint64_t all = ~0ull, old = 0;
  raw6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&old, 8, 0, 0);
  long tid = raw_clone(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                           CLONE_SYSVSEM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID,
                       STACK_TOP(stack + sz));
  raw6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0);
  CHECK(tid > 0, "clone: %ld", tid);
  char c;
  CHECK(read(ready_pipe[0], &c, 1) == 1 && c == 'r', "ready: %s", strerror(errno));
  CHECK(blocks_everything(tid), "the raw thread does not block every signal");

  uid_t r, e, s;
  gid_t gr, ge, gs;
  CHECK_EQ(getresuid(&r, &e, &s), 0);
  CHECK_EQ(getresgid(&gr, &ge, &gs), 0);
  gid_t groups[256];
  int ng = getgroups(256, groups);
  CHECK(ng >= 0, "getgroups: %s", strerror(errno));
  for (int i = 0; i < 20; i++) {
    CHECK(setresuid(r, e, s) == 0, "setresuid: %s", strerror(errno));
    CHECK(setresgid(gr, ge, gs) == 0, "setresgid: %s", strerror(errno));
    if (e == 0) CHECK(setgroups(ng, groups) == 0, "setgroups: %s", strerror(errno));
  }
  uid_t r2, e2, s2;
  CHECK_EQ(getresuid(&r2, &e2, &s2), 0);
  CHECK(r2 == r && e2 == e && s2 == s, "credentials changed");

  CHECK(write(go_pipe[1], "g", 1) == 1, "go: %s", strerror(errno));
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%ld", tid);
  while (access(path, F_OK) == 0) sched_yield(); /* the kernel reaps it */
  printf("credential changes beside a raw-clone thread that blocks every signal: done\n");
  return 0;
}
