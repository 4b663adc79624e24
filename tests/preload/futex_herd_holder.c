/* A herd of lock waiters that wake each other while the thread they wait
 * for is runnable but not running (InnoDB's read latch wait: a waiter that
 * finds the writer still holding the latch wakes every other waiter, then
 * waits again on the futex). Each round, the "holder" marks the word held,
 * wakes the two waiters, yields (it is now queued behind them), then marks
 * the word free and waits for both to acknowledge. The waiters ping-pong:
 * each wakes the other and sleeps, over and over, until the holder gets to
 * run. With fewer processors than threads the holder must still get its
 * turn promptly: ROUNDS rounds fit well within the case's timeout unless
 * the ping-pong keeps it off the processor for a whole time slice each
 * round. Every round's hand-over is checked. */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"

#define ROUNDS 3000
#define WAITERS 2

static _Atomic int gen;   /* 2r+1: round r held; 2r+2: round r free */
static _Atomic int acks;  /* waiters done with their rounds */
static _Atomic long wakes;

static void fwait(_Atomic int *w, int val) {
  syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void fwake(_Atomic int *w) { syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0); }

static inline void cpu_pause(void) {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static void *waiter(void *arg) {
  (void)arg;
  for (int r = 0; r < ROUNDS; r++) {
    int g;
    while ((g = atomic_load(&gen)) < 2 * r + 1) fwait(&gen, g);
    while (atomic_load(&gen) == 2 * r + 1) {
      fwake(&gen); /* the others may find it free: let them look */
      atomic_fetch_add(&wakes, 1);
      for (int i = 0; i < 50; i++) cpu_pause();
      fwait(&gen, 2 * r + 1);
    }
    CHECK_EQ(atomic_load(&gen), 2 * r + 2);
    if (atomic_fetch_add(&acks, 1) + 1 == WAITERS * (r + 1)) fwake(&acks);
  }
  return NULL;
}

int main(void) {
  pthread_t t[WAITERS];
  for (int i = 0; i < WAITERS; i++) CHECK_EQ(pthread_create(&t[i], NULL, waiter, NULL), 0);
  for (int r = 0; r < ROUNDS; r++) {
    atomic_store(&gen, 2 * r + 1); /* held */
    fwake(&gen);
    sched_yield(); /* the holder is now behind the waiters */
    atomic_store(&gen, 2 * r + 2); /* free */
    fwake(&gen);
    int a;
    while ((a = atomic_load(&acks)) < WAITERS * (r + 1)) fwait(&acks, a);
    CHECK_EQ(a, WAITERS * (r + 1));
  }
  for (int i = 0; i < WAITERS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  printf("%d rounds, every waiter saw every hand-over\n", ROUNDS);
  return 0;
}
