/* Blocking that goshim cannot see still lets other threads run:
 * (1) a thread blocked in a raw read system call on an empty pipe, until
 *     another thread writes to it;
 * (2) a thread holding stdout's lock while it waits, and another thread
 *     calling printf (which blocks in glibc's internal lock). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"

static int pfd[2];
static volatile int reader_blocked;

static void *raw_reader(void *arg) {
  char c = 0;
  reader_blocked = 1;
  long n = syscall(SYS_read, pfd[0], &c, 1);
  CHECK(n == 1 && c == 'x', "raw read returned %ld", n);
  return NULL;
}

static void *raw_writer(void *arg) {
  while (!reader_blocked) sched_yield();
  for (int i = 0; i < 100; i++) sched_yield();
  CHECK_EQ(write(pfd[1], "x", 1), 1);
  return NULL;
}

static volatile int locked, printed, release;

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
  printf("printer done\n"); /* blocks in glibc until the holder unlocks */
  printed = 1;
  return NULL;
}

static void *releaser(void *arg) {
  while (!locked) sched_yield();
  for (int i = 0; i < 1000; i++) sched_yield();
  release = 1;
  return NULL;
}

int main(void) {
  CHECK_EQ(pipe(pfd), 0);
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
