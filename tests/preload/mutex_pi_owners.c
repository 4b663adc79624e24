/* Priority inheritance for many owners at once: NOWN kernel threads, each
 * the owner of its own PTHREAD_PRIO_INHERIT mutex, each raised by its own
 * SCHED_FIFO 30 waiter, all at the same time (natively the kernel raises
 * every one; there is no limit to how many).
 *
 * The owners are started from a constructor (before a preloaded runtime
 * initializes: they stay plain kernel threads, never its goroutines). As
 * in mutex_pi_boost, the process pins itself to one CPU (affinity set,
 * then re-executed five steps nicer). Then:
 *   - each owner reads its own kernel priority, locks its mutex;
 *   - main starts NOWN waiters (SCHED_FIFO 30), each locks one owner's
 *     mutex, and waits until every one of them sleeps in its lock;
 *   - M (SCHED_FIFO 10) starts, lets the owners go, and spins until every
 *     waiter has had its mutex (or, as the failure bound only, a monotonic
 *     deadline);
 *   - each owner reads its kernel priority (/proc/thread-self/stat: -31 is
 *     real-time 30), waits at a barrier until all NOWN have read theirs
 *     (so all NOWN are raised at once), computes WORK, unlocks, and reads
 *     it again (its own again).
 * With inheritance, every owner runs at 30 ahead of M; an owner left
 * unraised reads its own priority and, beside M, barely gets the CPU.
 *
 * Exit 77 (SKIP) when the process cannot be pinned or SCHED_FIFO is not
 * permitted. RLIMIT_RTTIME bounds every real-time thread. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "common.h"

#define NOWN 40
#define WORK 5000000L /* each owner's computation under its mutex: a few ms */
#define DEADLINE_S 3  /* M's bound */

static pthread_mutex_t mu[NOWN];
static pthread_barrier_t bar;
static pthread_t owner_th[NOWN];
static int stage; /* futex word: 1 owners lock, 2 owners go on */
static atomic_int nlocked, ngot;
static int waiter_tid[NOWN], got[NOWN];
static int prio_before[NOWN], prio_raised[NOWN], prio_after[NOWN];
static int m_timed_out;

static void spin(long n) {
  for (volatile long i = 0; i < n; i++) {
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The calling kernel thread's priority (field 18 of /proc/thread-self/stat:
 * 20 + nice for SCHED_OTHER, -1 - P at real-time priority P). */
static int kernel_prio(void) {
  char buf[1024];
  FILE *f = fopen("/proc/thread-self/stat", "r");
  CHECK(f != NULL, "/proc/thread-self/stat: %s", strerror(errno));
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  CHECK(p != NULL, "no ) in stat");
  int field = 2, prio = 0;
  char *save = NULL;
  for (char *t = strtok_r(p + 1, " ", &save); t; t = strtok_r(NULL, " ", &save))
    if (++field == 18) {
      prio = atoi(t);
      break;
    }
  CHECK_EQ(field, 18);
  return prio;
}

static void stage_wait(int want) {
  int v;
  while ((v = __atomic_load_n(&stage, __ATOMIC_ACQUIRE)) < want)
    syscall(SYS_futex, &stage, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void stage_set(int v) {
  __atomic_store_n(&stage, v, __ATOMIC_RELEASE);
  syscall(SYS_futex, &stage, FUTEX_WAKE_PRIVATE, NOWN, NULL, NULL, 0);
}

static void *owner(void *arg) {
  int i = (int)(long)arg;
  stage_wait(1);
  prio_before[i] = kernel_prio();
  CHECK_EQ(pthread_mutex_lock(&mu[i]), 0);
  atomic_fetch_add(&nlocked, 1);
  stage_wait(2);
  prio_raised[i] = kernel_prio();
  int r = pthread_barrier_wait(&bar);
  CHECK(r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD, "barrier: %d", r);
  spin(WORK);
  CHECK_EQ(pthread_mutex_unlock(&mu[i]), 0);
  prio_after[i] = kernel_prio();
  return NULL;
}

static void *waiter(void *arg) {
  int i = (int)(long)arg;
  __atomic_store_n(&waiter_tid[i], self_tid(), __ATOMIC_RELEASE);
  CHECK_EQ(pthread_mutex_lock(&mu[i]), 0);
  __atomic_store_n(&got[i], 1, __ATOMIC_RELEASE);
  atomic_fetch_add(&ngot, 1);
  CHECK_EQ(pthread_mutex_unlock(&mu[i]), 0);
  return NULL;
}

static void *mid(void *arg) {
  (void)arg;
  stage_set(2);
  double end = now() + DEADLINE_S;
  for (long i = 0; atomic_load(&ngot) < NOWN; i++)
    if ((i & 0xffff) == 0 && now() > end) {
      m_timed_out = 1;
      break;
    }
  return NULL;
}

static void *nothing(void *arg) { return arg; }

static pthread_t rt_thread(void *(*fn)(void *), void *arg, int prio, int *err) {
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
  pthread_attr_setschedpolicy(&at, SCHED_FIFO);
  struct sched_param sp = {.sched_priority = prio};
  pthread_attr_setschedparam(&at, &sp);
  pthread_t t = 0;
  *err = pthread_create(&t, &at, fn, arg);
  pthread_attr_destroy(&at);
  return t;
}

/* The owners: started before main (and before a preloaded runtime starts
 * its own threads), in the pinned process only. */
__attribute__((constructor)) static void early(void) {
  if (!getenv("MUTEX_PI_OWNERS_PINNED")) return;
  pthread_mutexattr_t at;
  CHECK_EQ(pthread_mutexattr_init(&at), 0);
  CHECK_EQ(pthread_mutexattr_setprotocol(&at, PTHREAD_PRIO_INHERIT), 0);
  for (int i = 0; i < NOWN; i++) CHECK_EQ(pthread_mutex_init(&mu[i], &at), 0);
  CHECK_EQ(pthread_barrier_init(&bar, NULL, NOWN), 0);
  for (long i = 0; i < NOWN; i++)
    CHECK_EQ(pthread_create(&owner_th[i], NULL, owner, (void *)i), 0);
}

int main(int argc, char **argv) {
  (void)argc;
  int rc = pin_one_cpu_reexec("MUTEX_PI_OWNERS_PINNED", argv, 5);
  if (rc) return rc;
  struct rlimit rl = {5000000, 6000000};
  setrlimit(RLIMIT_RTTIME, &rl);
  int err;
  pthread_t t = rt_thread(nothing, NULL, 10, &err);
  if (err) {
    fprintf(stderr, "SKIP: SCHED_FIFO not permitted here (%s)\n", strerror(err));
    stage_set(1); /* the owners lock, then go on at once */
    while (atomic_load(&nlocked) < NOWN) sched_yield();
    stage_set(2);
    for (int i = 0; i < NOWN; i++) pthread_join(owner_th[i], NULL);
    return 77;
  }
  CHECK_EQ(pthread_join(t, NULL), 0);

  stage_set(1);
  while (atomic_load(&nlocked) < NOWN) sched_yield();
  pthread_t w[NOWN];
  for (long i = 0; i < NOWN; i++) {
    w[i] = rt_thread(waiter, (void *)i, 30, &err);
    CHECK_EQ(err, 0);
  }
  for (int i = 0; i < NOWN; i++) {
    while (!__atomic_load_n(&waiter_tid[i], __ATOMIC_ACQUIRE)) sched_yield();
    wait_tid_asleep(waiter_tid[i], &got[i]);
  }
  pthread_t m = rt_thread(mid, NULL, 10, &err);
  CHECK_EQ(err, 0);
  CHECK_EQ(pthread_join(m, NULL), 0);
  for (int i = 0; i < NOWN; i++) CHECK_EQ(pthread_join(w[i], NULL), 0);
  for (int i = 0; i < NOWN; i++) CHECK_EQ(pthread_join(owner_th[i], NULL), 0);
  int unraised = 0, first = -1, kept = 0;
  for (int i = 0; i < NOWN; i++) {
    if (prio_raised[i] != -31 && unraised++ == 0) first = i;
    if (prio_after[i] != prio_before[i]) kept++;
  }
  CHECK(unraised == 0,
        "%d of %d owners were not raised while their waiter (real-time 30) waited (owner %d: "
        "kernel priority %d, not -31)",
        unraised, NOWN, first, first >= 0 ? prio_raised[first] : 0);
  CHECK(!m_timed_out, "the waiters had their mutexes only after M's %d s deadline", DEADLINE_S);
  CHECK(kept == 0, "%d owners kept a priority other than their own after their unlock", kept);
  printf("%d owners raised at once; every waiter got its mutex while M spun\n", NOWN);
  return 0;
}
