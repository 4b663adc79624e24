/* C11 threads (<threads.h>): thrd_create/join/detach/exit/current/equal,
 * mtx_* of every type, cnd_* with and without timeouts, call_once, with
 * 3,000 threads alive at once handing a token round a ring of mutexes
 * and condition variables (under goshim they are goroutines: the kernel
 * thread count stays small). Results are the same natively. */
#include <errno.h>
#include <stdint.h>
#include <threads.h>
#include <time.h>

#include "common.h"

#define RING 3000
#define LAPS 3

static mtx_t ring_mu;
static cnd_t ring_cv[RING]; /* each member waits on its own */
static int token;     /* index of the thread whose turn it is */
static long passes;   /* total hand-overs */
static int alive;     /* threads started and not yet finished */

static int ring_member(void *arg) {
  int id = (int)(intptr_t)arg;
  mtx_lock(&ring_mu);
  alive++;
  for (int lap = 0; lap < LAPS; lap++) {
    while (token != id) cnd_wait(&ring_cv[id], &ring_mu);
    token = (id + 1) % RING;
    passes++;
    cnd_signal(&ring_cv[token]);
  }
  alive--;
  mtx_unlock(&ring_mu);
  return id % 7 - 3; /* negative results too */
}

static once_flag once = ONCE_FLAG_INIT;
static int once_runs;
static void init_once(void) {
  thrd_sleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL); /* others wait */
  once_runs++;
}
static int once_user(void *arg) {
  (void)arg;
  call_once(&once, init_once);
  return once_runs;
}

static int exits_early(void *arg) {
  (void)arg;
  thrd_exit(42);
  return 0; /* not reached */
}

static thrd_t main_thr;
static int identity(void *arg) {
  thrd_t *out = arg;
  *out = thrd_current();
  return thrd_equal(thrd_current(), main_thr) ? 1 : 0;
}

static mtx_t held;
static int try_held(void *arg) {
  (void)arg;
  if (mtx_trylock(&held) != thrd_busy) return 1;
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  ts.tv_nsec += 30 * 1000 * 1000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  if (mtx_timedlock(&held, &ts) != thrd_timedout) return 2;
  return 0;
}

static volatile int detached_done;
static int detached(void *arg) {
  (void)arg;
  __atomic_store_n(&detached_done, 1, __ATOMIC_SEQ_CST);
  return 0;
}

int main(void) {
  main_thr = thrd_current();

  /* The ring. */
  CHECK_EQ(mtx_init(&ring_mu, mtx_plain), thrd_success);
  for (int i = 0; i < RING; i++) CHECK_EQ(cnd_init(&ring_cv[i]), thrd_success);
  static thrd_t t[RING];
  for (int i = 0; i < RING; i++)
    CHECK_EQ(thrd_create(&t[i], ring_member, (void *)(intptr_t)i), thrd_success);
  for (;;) {
    mtx_lock(&ring_mu);
    int a = alive;
    long p = passes;
    mtx_unlock(&ring_mu);
    if (a == RING || p >= RING) break;
    thrd_yield();
  }
  check_kernel_threads("3000 C11 threads alive");
  long sum = 0;
  for (int i = 0; i < RING; i++) {
    int res = 99;
    CHECK_EQ(thrd_join(t[i], &res), thrd_success);
    CHECK_EQ(res, i % 7 - 3);
    sum += res;
  }
  CHECK_EQ(passes, (long)RING * LAPS);
  printf("ring: %d threads, %ld passes, result sum %ld\n", RING, passes, sum);

  /* call_once from many threads: one run, everybody sees it done. */
  thrd_t o[50];
  for (int i = 0; i < 50; i++) CHECK_EQ(thrd_create(&o[i], once_user, NULL), thrd_success);
  for (int i = 0; i < 50; i++) {
    int res = -1;
    CHECK_EQ(thrd_join(o[i], &res), thrd_success);
    CHECK_EQ(res, 1);
  }
  CHECK_EQ(once_runs, 1);

  /* thrd_exit's value reaches thrd_join; identity. */
  thrd_t e;
  int res = 0;
  CHECK_EQ(thrd_create(&e, exits_early, NULL), thrd_success);
  CHECK_EQ(thrd_join(e, &res), thrd_success);
  CHECK_EQ(res, 42);
  thrd_t seen;
  CHECK_EQ(thrd_create(&e, identity, &seen), thrd_success);
  CHECK_EQ(thrd_join(e, &res), thrd_success);
  CHECK_EQ(res, 0);
  CHECK(thrd_equal(seen, e), "thrd_current in the thread is its thrd_t");
  CHECK(thrd_equal(thrd_current(), main_thr), "main's identity");

  /* mtx_trylock / mtx_timedlock on a held mutex; recursive mutexes. */
  CHECK_EQ(mtx_init(&held, mtx_timed), thrd_success);
  CHECK_EQ(mtx_lock(&held), thrd_success);
  CHECK_EQ(thrd_create(&e, try_held, NULL), thrd_success);
  CHECK_EQ(thrd_join(e, &res), thrd_success);
  CHECK_EQ(res, 0);
  CHECK_EQ(mtx_unlock(&held), thrd_success);
  mtx_destroy(&held);
  mtx_t rec;
  CHECK_EQ(mtx_init(&rec, mtx_plain | mtx_recursive), thrd_success);
  for (int i = 0; i < 5; i++) CHECK_EQ(mtx_lock(&rec), thrd_success);
  CHECK_EQ(mtx_trylock(&rec), thrd_success);
  for (int i = 0; i < 6; i++) CHECK_EQ(mtx_unlock(&rec), thrd_success);
  mtx_destroy(&rec);

  /* cnd_timedwait times out with the mutex held again. */
  mtx_t m;
  cnd_t c;
  CHECK_EQ(mtx_init(&m, mtx_timed), thrd_success);
  CHECK_EQ(cnd_init(&c), thrd_success);
  struct timespec before, ts;
  timespec_get(&before, TIME_UTC);
  ts = before;
  ts.tv_nsec += 50 * 1000 * 1000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  CHECK_EQ(mtx_lock(&m), thrd_success);
  CHECK_EQ(cnd_timedwait(&c, &m, &ts), thrd_timedout);
  CHECK_EQ(mtx_trylock(&m), thrd_busy); /* still ours (normal mutex: busy) */
  CHECK_EQ(mtx_unlock(&m), thrd_success);
  struct timespec after;
  timespec_get(&after, TIME_UTC);
  CHECK(after.tv_sec > ts.tv_sec || (after.tv_sec == ts.tv_sec && after.tv_nsec >= ts.tv_nsec),
        "cnd_timedwait returned before its deadline");
  cnd_destroy(&c);
  mtx_destroy(&m);

  /* A detached thread runs; joining it is an error. */
  CHECK_EQ(thrd_create(&e, detached, NULL), thrd_success);
  CHECK_EQ(thrd_detach(e), thrd_success);
  while (!__atomic_load_n(&detached_done, __ATOMIC_SEQ_CST)) thrd_yield();

  printf("c11 threads: once, exit, identity, trylock/timedlock, recursive, timedwait, detach ok\n");
  return 0;
}
