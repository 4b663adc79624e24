/* Two threads take turns through one futex word (each waits for its
 * turn, hands the turn over and wakes the other, as C++20's atomic
 * wait/notify does) while a third thread computes without pause until
 * they are done. Each of them wakes a waiter on the word it then waits on
 * again, yet each one made progress: the pair must go on at a useful
 * rate at any processor count. EXCHANGES turns fit well within the case's
 * timeout unless each one waits for a whole time slice of the computing
 * thread. Every turn is checked. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"

#define EXCHANGES 40000

static _Atomic int turn; /* whose turn: 0 or 1 */
static long turns[2];
static atomic_int done;
static volatile unsigned long sink;

static void *player(void *arg) {
  int me = (int)(long)arg;
  for (int i = 0; i < EXCHANGES / 2; i++) {
    int t;
    while ((t = atomic_load(&turn)) != me) {
      long r = syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, t, NULL, NULL, 0);
      CHECK(r == 0 || errno == EAGAIN || errno == EINTR, "futex wait: %s", strerror(errno));
    }
    turns[me]++;
    atomic_store(&turn, 1 - me);
    CHECK(syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) >= 0, "futex wake");
  }
  return NULL;
}

static void *spinner(void *arg) {
  (void)arg;
  unsigned long x = 1;
  while (!atomic_load_explicit(&done, memory_order_relaxed))
    for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
  return NULL;
}

int main(void) {
  pthread_t s, p[2];
  CHECK_EQ(pthread_create(&s, NULL, spinner, NULL), 0);
  for (long i = 0; i < 2; i++) CHECK_EQ(pthread_create(&p[i], NULL, player, (void *)i), 0);
  for (int i = 0; i < 2; i++) CHECK_EQ(pthread_join(p[i], NULL), 0);
  atomic_store(&done, 1);
  CHECK_EQ(pthread_join(s, NULL), 0);
  CHECK_EQ(turns[0], EXCHANGES / 2);
  CHECK_EQ(turns[1], EXCHANGES / 2);
  CHECK_EQ(atomic_load(&turn), 0);
  printf("%d turns on one word beside a computing thread\n", EXCHANGES);
  return 0;
}
