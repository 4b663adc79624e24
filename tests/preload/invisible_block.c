/* Blocking that goshim cannot see still lets other threads run:
 * (1) a thread blocked in a read system call made with the syscall
 *     instruction itself (as a statically linked library or another
 *     language's runtime would: no libc function is called, so nothing can
 *     be interposed), on an empty pipe made the same way, until another
 *     thread writes to it;
 * (2) a thread holding stdout's lock while it waits, and another thread
 *     calling printf (which blocks in glibc's internal lock). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"

static int pfd[2];
/* Kernel thread ids published just before each blocking call (common.h's
   handshake): the acting thread waits until that kernel thread sleeps. */
static volatile int reader_tid, printer_tid;

/* A three-argument system call without libc. */
static long raw3(long nr, long a, long b, long c) {
#if defined(__x86_64__)
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "0"(nr), "D"(a), "S"(b), "d"(c)
                   : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
  return x0;
#else
#error "raw3: add this architecture's system-call instruction"
#endif
}
static long raw_read(int fd, void *buf, unsigned long len) {
  return raw3(SYS_read, fd, (long)buf, (long)len);
}

static void *raw_reader(void *arg) {
  char c = 0;
  __atomic_store_n(&reader_tid, self_tid(), __ATOMIC_RELEASE);
  long n = raw_read(pfd[0], &c, 1);
  CHECK(n == 1 && c == 'x', "raw read returned %ld", n);
  return NULL;
}

static void *raw_writer(void *arg) {
  while (!__atomic_load_n(&reader_tid, __ATOMIC_ACQUIRE)) sched_yield();
  /* Natively the reader can sleep only inside its raw read: the write
     then finds it blocked. Under goshim the id is the kernel thread that
     made the call, blocked in it where goshim cannot see. */
  wait_tid_asleep(reader_tid, NULL);
  CHECK_EQ(write(pfd[1], "x", 1), 1);
  return NULL;
}

static volatile int locked, release;
static int printed;

static void *holder(void *arg) {
  flockfile(stdout);
  locked = 1;
  while (!release) sched_yield(); /* waits, holding the lock */
  fputs("holder done\n", stdout);
  funlockfile(stdout);
  return NULL;
}

static void *printer(void *arg) {
  while (!locked) sched_yield();
  __atomic_store_n(&printer_tid, self_tid(), __ATOMIC_RELEASE);
  printf("printer done\n"); /* blocks in glibc until the holder unlocks */
  __atomic_store_n(&printed, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void *releaser(void *arg) {
  while (!__atomic_load_n(&printer_tid, __ATOMIC_ACQUIRE)) sched_yield();
  /* The printer sleeps in glibc's stdout lock (a futex goshim does not
     see) before the holder lets go of it. */
  wait_tid_asleep(printer_tid, &printed);
  CHECK(!__atomic_load_n(&printed, __ATOMIC_ACQUIRE), "printf did not wait for stdout's lock");
  release = 1;
  return NULL;
}

int main(void) {
  CHECK_EQ(raw3(SYS_pipe2, (long)pfd, 0, 0), 0);
  pthread_t r, w;
  CHECK_EQ(pthread_create(&r, NULL, raw_reader, NULL), 0);
  CHECK_EQ(pthread_create(&w, NULL, raw_writer, NULL), 0);
  CHECK_EQ(pthread_join(r, NULL), 0);
  CHECK_EQ(pthread_join(w, NULL), 0);
  setvbuf(stdout, NULL, _IOLBF, 0);
  pthread_t h, p, rl;
  CHECK_EQ(pthread_create(&h, NULL, holder, NULL), 0);
  CHECK_EQ(pthread_create(&p, NULL, printer, NULL), 0);
  CHECK_EQ(pthread_create(&rl, NULL, releaser, NULL), 0);
  CHECK_EQ(pthread_join(h, NULL), 0);
  CHECK_EQ(pthread_join(p, NULL), 0);
  CHECK_EQ(pthread_join(rl, NULL), 0);
  CHECK(printed, "printer did not finish");
  return 0;
}
