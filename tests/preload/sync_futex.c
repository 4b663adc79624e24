/* syscall(SYS_futex, ...) as programs issue it themselves: every operation
 * goshim serves in-process (FUTEX_WAIT, WAKE, WAIT_BITSET, WAKE_BITSET,
 * REQUEUE, CMP_REQUEUE, WAKE_OP, with and without FUTEX_PRIVATE_FLAG and
 * FUTEX_CLOCK_REALTIME), their results, errno values and wake-up counts,
 * timeouts, and waits with threads blocked; plus syscall() for other
 * numbers. Output must be identical natively and under goshim. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static long fx(void *a, int op, int val, const void *t, void *a2, int val3) {
  return syscall(SYS_futex, a, op, val, t, a2, val3);
}

#define EXPECT(call, ret, err)                                                   \
  do {                                                                           \
    errno = 0;                                                                   \
    long r_ = (call);                                                            \
    int e_ = errno;                                                              \
    CHECK(r_ == (ret) && (r_ != -1 || e_ == (err)), "%s: got %ld errno %d (%s)", #call, r_, \
          e_, strerror(e_));                                                     \
  } while (0)

static int words[4];
static int nwaiting;

struct waiter {
  int *addr;
  int val;
  int op;
  int bitset;
  long result;
  int err;
  pthread_t t;
  int tid, done; /* set just before / after the wait */
};

static void *wait_thread(void *p) {
  struct waiter *w = p;
  __atomic_add_fetch(&nwaiting, 1, __ATOMIC_SEQ_CST);
  errno = 0;
  __atomic_store_n(&w->tid, self_tid(), __ATOMIC_RELEASE);
  w->result = fx(w->addr, w->op, w->val, NULL, NULL, w->bitset);
  w->err = errno;
  __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* Starts n waiters on addr and waits until they are blocked: each
 * publishes its kernel thread id just before its wait, and that thread
 * must sleep (state S: natively in the futex wait). A waiter whose wait
 * returned at once shows in its result. */
static void start_waiters(struct waiter *w, int n, int *addr, int op, int bitset_base) {
  nwaiting = 0;
  for (int i = 0; i < n; i++) {
    w[i] = (struct waiter){addr, *addr, op, bitset_base ? (bitset_base << i) : 0, -2, 0, 0, 0, 0};
    pthread_create(&w[i].t, NULL, wait_thread, &w[i]);
  }
  while (__atomic_load_n(&nwaiting, __ATOMIC_SEQ_CST) < n) sched_yield();
  for (int i = 0; i < n; i++) {
    wait_flag(&w[i].tid);
    wait_tid_asleep(__atomic_load_n(&w[i].tid, __ATOMIC_ACQUIRE), &w[i].done);
  }
}

static int wake_all_counting(int *addr, int op, int n) {
  int woken = 0;
  while (woken < n) {
    long r = fx(addr, op, 1, NULL, NULL, FUTEX_BITSET_MATCH_ANY);
    CHECK(r >= 0, "wake failed");
    woken += (int)r;
    if (r == 0) sched_yield();
  }
  return woken;
}

static void join_all(struct waiter *w, int n) {
  for (int i = 0; i < n; i++) {
    pthread_join(w[i].t, NULL);
    CHECK(w[i].result == 0, "waiter %d: %ld errno %d", i, w[i].result, w[i].err);
  }
}

static void argument_checks(int priv) {
  struct timespec neg = {-1, 0}, badns = {0, 1000000000}, zero = {0, 0};
  int *w = &words[0];
  *w = 5;
  EXPECT(fx(w, FUTEX_WAIT | priv, 4, NULL, NULL, 0), -1, EAGAIN);
  EXPECT(fx(w, FUTEX_WAIT | priv, 5, &zero, NULL, 0), -1, ETIMEDOUT);
  EXPECT(fx(w, FUTEX_WAIT | priv, 4, &zero, NULL, 0), -1, EAGAIN); /* value first */
  EXPECT(fx(w, FUTEX_WAIT | priv, 5, &neg, NULL, 0), -1, EINVAL);
  EXPECT(fx(w, FUTEX_WAIT | priv, 5, &badns, NULL, 0), -1, EINVAL);
  EXPECT(fx(w, FUTEX_WAIT_BITSET | priv, 5, NULL, NULL, 0), -1, EINVAL); /* bitset 0 */
  EXPECT(fx(w, FUTEX_WAKE_BITSET | priv, 1, NULL, NULL, 0), -1, EINVAL);
  EXPECT(fx((char *)w + 1, FUTEX_WAKE | priv, 1, NULL, NULL, 0), -1, EINVAL);
  EXPECT(fx(NULL, FUTEX_WAIT | priv, 0, NULL, NULL, 0), -1, EFAULT);
  /* a private wake touches no memory; a shared one needs the page */
  EXPECT(fx(NULL, FUTEX_WAKE | priv, 1, NULL, NULL, 0), priv ? 0 : -1, priv ? 0 : EFAULT);
  EXPECT(fx(w, FUTEX_WAKE | priv | FUTEX_CLOCK_REALTIME, 1, NULL, NULL, 0), -1, ENOSYS);
  EXPECT(fx(w, FUTEX_REQUEUE | priv, -1, NULL, &words[1], 0), -1, EINVAL);
  EXPECT(fx(w, FUTEX_REQUEUE | priv, 1, (void *)-1L, &words[1], 0), -1, EINVAL);
  EXPECT(fx(w, FUTEX_CMP_REQUEUE | priv, 1, (void *)1L, &words[1], 4), -1, EAGAIN);
  EXPECT(fx(w, FUTEX_CMP_REQUEUE | priv, 1, (void *)1L, &words[1], 5), 0, 0);
  EXPECT(fx(w, FUTEX_WAKE_OP | priv, 1, (void *)1L, &words[1], 7u << 28), -1, ENOSYS);
  EXPECT(fx(w, FUTEX_WAKE | priv, 1, NULL, NULL, 0), 0, 0);
  EXPECT(fx(w, FUTEX_WAKE | priv, 0, NULL, NULL, 0), 0, 0);
  /* absolute timeouts: monotonic (default) and realtime */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_nsec += 20 * 1000 * 1000;
  if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
  EXPECT(fx(w, FUTEX_WAIT_BITSET | priv, 5, &ts, NULL, ~0), -1, ETIMEDOUT);
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += 20 * 1000 * 1000;
  if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
  EXPECT(fx(w, FUTEX_WAIT_BITSET | priv | FUTEX_CLOCK_REALTIME, 5, &ts, NULL, ~0), -1, ETIMEDOUT);
  struct timespec rel = {0, 20 * 1000 * 1000};
  EXPECT(fx(w, FUTEX_WAIT | priv | FUTEX_CLOCK_REALTIME, 5, &rel, NULL, 0), -1, ENOSYS);
  EXPECT(fx(w, FUTEX_WAIT | priv, 5, &rel, NULL, 0), -1, ETIMEDOUT);
  /* FUTEX_WAKE_OP on an unwatched word: the operation and the count */
  words[1] = 10;
  EXPECT(fx(w, FUTEX_WAKE_OP | priv, 1, (void *)1L, &words[1],
            FUTEX_OP(FUTEX_OP_ADD, 5, FUTEX_OP_CMP_EQ, 10)), 0, 0);
  CHECK_EQ(words[1], 15);
  EXPECT(fx(w, FUTEX_WAKE_OP | priv, 1, (void *)1L, &words[1],
            FUTEX_OP((FUTEX_OP_OR | FUTEX_OP_OPARG_SHIFT), 8, FUTEX_OP_CMP_GT, 100)), 0, 0);
  CHECK_EQ(words[1], 15 | 256);
  EXPECT(fx(w, FUTEX_WAKE_OP | priv, 1, (void *)1L, &words[1],
            FUTEX_OP(FUTEX_OP_ANDN, 1, FUTEX_OP_CMP_NE, 0)), 0, 0);
  CHECK_EQ(words[1], (15 | 256) & ~1);
  EXPECT(fx(w, FUTEX_WAKE_OP | priv, 1, (void *)1L, &words[1],
            FUTEX_OP(FUTEX_OP_XOR, 0xfff, FUTEX_OP_CMP_LT, 0)), 0, 0); /* oparg -1 */
  CHECK_EQ(words[1], ~((15 | 256) & ~1));
  EXPECT(fx(w, FUTEX_WAKE_OP | priv, 1, (void *)1L, &words[1],
            FUTEX_OP(FUTEX_OP_SET, 3, FUTEX_OP_CMP_GE, 0)), 0, 0);
  CHECK_EQ(words[1], 3);
  printf("%s: argument checks, errors, timeouts and WAKE_OP arithmetic\n",
         priv ? "private" : "non-private");
}

static void blocking(int priv) {
  struct waiter w[6];
  /* FUTEX_WAKE counts, including nr_wake 0 waking one */
  words[0] = 0;
  start_waiters(w, 4, &words[0], FUTEX_WAIT | priv, 0);
  CHECK_EQ(fx(&words[0], FUTEX_WAKE | priv, 0, NULL, NULL, 0), 1);
  CHECK_EQ(fx(&words[0], FUTEX_WAKE | priv, 2, NULL, NULL, 0), 2);
  CHECK_EQ(fx(&words[0], FUTEX_WAKE | priv, 10, NULL, NULL, 0), 1);
  join_all(w, 4);
  /* bitsets: waiters i wait with bit i */
  start_waiters(w, 4, &words[0], FUTEX_WAIT_BITSET | priv, 1);
  CHECK_EQ(fx(&words[0], FUTEX_WAKE_BITSET | priv, 10, NULL, NULL, 0x5), 2);
  CHECK_EQ(fx(&words[0], FUTEX_WAKE_BITSET | priv, 10, NULL, NULL, 0x10), 0);
  CHECK_EQ(fx(&words[0], FUTEX_WAKE | priv, 10, NULL, NULL, 0), 2);
  join_all(w, 4);
  /* requeue: wake 1, move 2, leave 1 */
  start_waiters(w, 4, &words[0], FUTEX_WAIT | priv, 0);
  CHECK_EQ(fx(&words[0], FUTEX_REQUEUE | priv, 1, (void *)2L, &words[2], 0), 3);
  CHECK_EQ(fx(&words[2], FUTEX_WAKE | priv, 10, NULL, NULL, 0), 2);
  CHECK_EQ(fx(&words[0], FUTEX_WAKE | priv, 10, NULL, NULL, 0), 1);
  join_all(w, 4);
  /* cmp_requeue, then wake_op waking on both words */
  start_waiters(w, 4, &words[0], FUTEX_WAIT | priv, 0);
  CHECK_EQ(fx(&words[0], FUTEX_CMP_REQUEUE | priv, 0, (void *)2L, &words[2], 0), 2);
  words[2] = 1;
  CHECK_EQ(fx(&words[0], FUTEX_WAKE_OP | priv, 1, (void *)5L, &words[2],
              FUTEX_OP(FUTEX_OP_SET, 0, FUTEX_OP_CMP_EQ, 1)), 1 + 2);
  CHECK_EQ(words[2], 0);
  CHECK_EQ(fx(&words[0], FUTEX_WAKE | priv, 10, NULL, NULL, 0), 1);
  join_all(w, 4);
  /* a waiter woken by a value change and a wake (no lost wake-up) */
  for (int round = 0; round < 200; round++) {
    words[3] = 0;
    struct waiter one;
    one = (struct waiter){&words[3], 0, FUTEX_WAIT | priv, 0, -2, 0, 0, 0, 0};
    pthread_create(&one.t, NULL, wait_thread, &one);
    if (round % 2) sched_yield();
    __atomic_store_n(&words[3], 1, __ATOMIC_SEQ_CST);
    fx(&words[3], FUTEX_WAKE | priv, 1, NULL, NULL, 0);
    pthread_join(one.t, NULL);
    CHECK(one.result == 0 || (one.result == -1 && one.err == EAGAIN), "round %d: %ld/%d", round,
          one.result, one.err);
  }
  (void)wake_all_counting;
  printf("%s: wake counts, bitsets, requeue, cmp_requeue, wake_op with blocked waiters\n",
         priv ? "private" : "non-private");
}

int main(void) {
  argument_checks(FUTEX_PRIVATE_FLAG);
  argument_checks(0);
  blocking(FUTEX_PRIVATE_FLAG);
  blocking(0);
  /* other numbers pass through, with syscall()'s conventions */
  CHECK_EQ(syscall(SYS_getpid), getpid());
  errno = 0;
  CHECK_EQ(syscall(SYS_close, -1), -1);
  CHECK_EQ(errno, EBADF);
  CHECK_EQ(syscall(99999), -1);
  CHECK_EQ(errno, ENOSYS);
  void *p = (void *)syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(p != MAP_FAILED, "mmap through syscall()");
  int *sw = p;
  *sw = 7;
  EXPECT(fx(sw, FUTEX_WAIT, 6, NULL, NULL, 0), -1, EAGAIN);
  EXPECT(fx(sw, FUTEX_WAKE, 1, NULL, NULL, 0), 0, 0);
  CHECK_EQ(syscall(SYS_munmap, p, 4096), 0);
  printf("other system calls pass through\n");
  return 0;
}
