/* A thread that overflows its stack dies with SIGSEGV on the guard page;
 * its neighbours' stacks are not touched (checked until the crash). */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include "common.h"

static volatile int started;

__attribute__((noinline)) static int recurse(volatile char *prev, int depth) {
  volatile char frame[256];
  frame[0] = (char)depth;
  frame[255] = prev ? prev[0] : 0;
  return recurse(frame, depth + 1) + frame[1];
}

static void *overflow(void *arg) {
  while (started < 4) sched_yield();
  return (void *)(long)recurse(NULL, 0);
}

static void *neighbour(void *arg) {
  volatile unsigned char canary[4096];
  for (int i = 0; i < 4096; i++) canary[i] = (unsigned char)(i * 7);
  __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
  for (;;) {
    for (int i = 0; i < 4096; i++)
      if (canary[i] != (unsigned char)(i * 7)) {
        fprintf(stderr, "neighbour stack corrupted\n");
        _exit(3);
      }
    sched_yield();
  }
  return arg;
}

int main(void) {
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 256 * 1024);
  pthread_t t;
  for (int i = 0; i < 4; i++) CHECK_EQ(pthread_create(&t, &a, neighbour, NULL), 0);
  CHECK_EQ(pthread_create(&t, &a, overflow, NULL), 0);
  pthread_join(t, NULL);
  fprintf(stderr, "the overflow did not crash\n");
  return 1;
}
