/* Priority inheritance (PTHREAD_PRIO_INHERIT): while a SCHED_FIFO thread
 * waits for such a mutex, its owner runs at the waiter's priority until it
 * unlocks, through a chain of such mutexes too (the kernel's rt-mutex
 * semantics, pthread_mutexattr_setprotocol(3p)).
 *
 * The process pins itself to one CPU (sets its affinity and re-executes
 * itself, so that every thread, a preloaded runtime's own included, has
 * it). Then, in each phase:
 *   - L, SCHED_OTHER, holds the PI mutex A;
 *   - M, SCHED_FIFO 10, starts and spins until H has had the mutex (or,
 *     as the failure bound only, until a monotonic deadline);
 *   - H, SCHED_FIFO 30, created by M, says it is about to lock and locks A.
 * L has WORK iterations to compute after H said so, before it unlocks.
 * With inheritance, L runs at 30 once H waits, ahead of M: H gets A while
 * M spins. Without it, M keeps L off the only CPU (but for the kernel's
 * real-time throttling, 5 % of it) and the deadline passes first.
 * Phase "chain": L1 holds A and waits for B, which L2 (SCHED_OTHER) holds
 * and computes under: H's priority must reach L2 through L1.
 * Phase "timeout": H's pthread_mutex_timedlock gives up after 50 ms; L,
 * which runs at H's priority meanwhile, is back at its own once H left
 * (under goshim it once failed in about 1 run in 20: an M that set its own
 * policy as a real-time G started or exited, raised by a recomputation in
 * between, kept SCHED_FIFO 30 with nothing recorded; core/pi.cpp
 * pi_m_set_own).
 * Also checked, on L's kernel thread (/proc/thread-self/stat, its
 * priority field): while H waits, L computes at H's priority (-31: real-time
 * 30); once it has unlocked, it is back at its own (its reading before it
 * locked). Not an order of events: the kernel's real-time throttling (5 % of
 * each second left to SCHED_OTHER threads) may run L before H.
 *
 * Exit 77 (SKIP) when the process cannot be pinned or SCHED_FIFO is not
 * permitted. RLIMIT_RTTIME bounds every real-time thread. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "common.h"

#define WORK 1000000000L /* L's computation under the mutex: 0.2-0.5 s of CPU */
#define DEADLINE_S 2     /* M's bound: L alone gets <= 0.1 s of CPU in it (throttling) */

/* PI_PSHARED (mutex_pi_pshared.c): the same with process-shared mutexes in
 * shared memory, and one more phase, "other process". */
#ifndef PI_PSHARED
#define PI_PSHARED 0
#endif

#if !PI_PSHARED
static pthread_mutex_t mstore[2];
#endif
static pthread_mutex_t *ma, *mb;
static atomic_int seq;
static atomic_int held;        /* L (or L2) holds its mutex */
static atomic_int h_waiting;   /* H is about to lock A */
static atomic_int h_got;       /* H has had A */
static int h_got_seq, m_end_seq, m_timed_out;
static int l_prio_before, l_prio_work, l_prio_after;
static int chain;

static void spin(long n) {
  for (volatile long i = 0; i < n; i++) {
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The calling kernel thread's priority as the kernel has it now: field 18
 * of /proc/thread-self/stat (20 + nice for SCHED_OTHER, -1 - P at real-time
 * priority P, inherited or its own). */
static int kernel_prio(void) {
  char buf[1024];
  FILE *f = fopen("/proc/thread-self/stat", "r");
  CHECK(f != NULL, "/proc/thread-self/stat: %s", strerror(errno));
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  CHECK(p != NULL, "no ) in stat");
  /* fields from 3 (state) on, after ") " */
  int field = 2, prio = 0;
  for (char *t = strtok(p + 1, " "); t; t = strtok(NULL, " "))
    if (++field == 18) {
      prio = atoi(t);
      break;
    }
  CHECK_EQ(field, 18);
  return prio;
}

/* The thread that computes under the contended mutex (A, or B in chain). */
static void *holder(void *arg) {
  pthread_mutex_t *m = arg;
  l_prio_before = kernel_prio();
  CHECK_EQ(pthread_mutex_lock(m), 0);
  atomic_store(&held, 1);
  while (!atomic_load(&h_waiting)) sched_yield();
  spin(WORK / 2);
  l_prio_work = kernel_prio();
  spin(WORK / 2);
  CHECK_EQ(pthread_mutex_unlock(m), 0);
  l_prio_after = kernel_prio();
  return NULL;
}

/* chain: L1 holds A and waits for B (L2's). */
static atomic_int l1_has_a;
static void *middle_owner(void *arg) {
  (void)arg;
  CHECK_EQ(pthread_mutex_lock(ma), 0);
  atomic_store(&l1_has_a, 1);
  CHECK_EQ(pthread_mutex_lock(mb), 0);
  CHECK_EQ(pthread_mutex_unlock(mb), 0);
  CHECK_EQ(pthread_mutex_unlock(ma), 0);
  return NULL;
}

static void *high(void *arg) {
  (void)arg;
  atomic_store(&h_waiting, 1);
  CHECK_EQ(pthread_mutex_lock(ma), 0);
  h_got_seq = atomic_fetch_add(&seq, 1);
  atomic_store(&h_got, 1);
  CHECK_EQ(pthread_mutex_unlock(ma), 0);
  return NULL;
}

static pthread_t rt_thread(void *(*fn)(void *), int prio, int *err) {
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
  pthread_attr_setschedpolicy(&at, SCHED_FIFO);
  struct sched_param sp = {.sched_priority = prio};
  pthread_attr_setschedparam(&at, &sp);
  pthread_t t = 0;
  *err = pthread_create(&t, &at, fn, NULL);
  pthread_attr_destroy(&at);
  return t;
}

static void *mid(void *arg) {
  (void)arg;
  int err;
  pthread_t h = rt_thread(high, 30, &err);
  CHECK_EQ(err, 0);
  double end = now() + DEADLINE_S;
  for (long i = 0; !atomic_load(&h_got); i++)
    if ((i & 0xffff) == 0 && now() > end) {
      m_timed_out = 1;
      break;
    }
  m_end_seq = atomic_fetch_add(&seq, 1);
  CHECK_EQ(pthread_join(h, NULL), 0);
  return NULL;
}

static void *nothing(void *arg) { return arg; }

/* Phase "timeout". */
static atomic_int h_left;
static void *timed_high(void *arg) {
  (void)arg;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += 50 * 1000 * 1000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  atomic_store(&h_waiting, 1);
  CHECK_EQ(pthread_mutex_timedlock(ma, &ts), ETIMEDOUT);
  atomic_store(&h_left, 1);
  return NULL;
}
static void *timeout_holder(void *arg) {
  (void)arg;
  l_prio_before = kernel_prio();
  CHECK_EQ(pthread_mutex_lock(ma), 0);
  atomic_store(&held, 1);
  while (!atomic_load(&h_waiting)) sched_yield();
  /* It sleeps between looks: H must get the CPU to give up (at H's
   * priority, L computing would keep it from H, natively too). */
  int raised = 0;
  while (!atomic_load(&h_left)) {
    if (kernel_prio() == -31) raised = 1;
    usleep(1000);
  }
  l_prio_after = kernel_prio();
  l_prio_work = raised ? -31 : l_prio_after;
  CHECK_EQ(pthread_mutex_unlock(ma), 0);
  return NULL;
}

static void phase_timeout(void) {
  atomic_store(&held, 0);
  atomic_store(&h_waiting, 0);
  atomic_store(&h_left, 0);
  pthread_t l, h;
  CHECK_EQ(pthread_create(&l, NULL, timeout_holder, NULL), 0);
  while (!atomic_load(&held)) sched_yield();
  int err;
  h = rt_thread(timed_high, 30, &err);
  CHECK_EQ(err, 0);
  CHECK_EQ(pthread_join(h, NULL), 0);
  CHECK_EQ(pthread_join(l, NULL), 0);
  CHECK(l_prio_work == -31, "timeout: L never ran at kernel priority -31 while H waited");
  CHECK(l_prio_after == l_prio_before,
        "timeout: L's kernel priority once H gave up is %d, not its own (%d)", l_prio_after,
        l_prio_before);
  printf("timeout: L raised while H waited, back once H gave up\n");
}

#if PI_PSHARED
/* Phase "other process": a child process owns A while H waits; nobody in
 * this process can raise it (natively the kernel does), but H gets A once
 * the child unlocks. */
static atomic_int h_tid;
static void *other_high(void *arg) {
  (void)arg;
  atomic_store(&h_tid, self_tid());
  CHECK_EQ(pthread_mutex_lock(ma), 0);
  atomic_store(&h_got, 1);
  CHECK_EQ(pthread_mutex_unlock(ma), 0);
  return NULL;
}

static void phase_other_process(void) {
  int ready[2], go[2];
  CHECK_EQ(pipe(ready), 0);
  CHECK_EQ(pipe(go), 0);
  atomic_store(&h_got, 0);
  atomic_store(&h_tid, 0);
  pid_t c = fork();
  CHECK(c >= 0, "fork: %s", strerror(errno));
  if (c == 0) {
    char b = 1;
    if (pthread_mutex_lock(ma) != 0 || write(ready[1], &b, 1) != 1 || read(go[0], &b, 1) != 1 ||
        pthread_mutex_unlock(ma) != 0)
      _exit(1);
    _exit(0);
  }
  char b;
  CHECK_EQ(read(ready[0], &b, 1), 1);
  int err;
  pthread_t h = rt_thread(other_high, 30, &err);
  CHECK_EQ(err, 0);
  while (!atomic_load(&h_tid)) sched_yield();
  wait_tid_asleep(atomic_load(&h_tid), (const volatile int *)&h_got);
  CHECK_EQ(write(go[1], &b, 1), 1);
  CHECK_EQ(pthread_join(h, NULL), 0);
  CHECK(atomic_load(&h_got), "other process: H never had the mutex");
  int st;
  CHECK_EQ(waitpid(c, &st, 0), c);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "other process: the child failed (status %#x)", st);
  close(ready[0]);
  close(ready[1]);
  close(go[0]);
  close(go[1]);
  printf("other process: H got the mutex once the other process's owner unlocked\n");
}
#endif

static void phase(int is_chain) {
  chain = is_chain;
  atomic_store(&seq, 0);
  atomic_store(&held, 0);
  atomic_store(&h_waiting, 0);
  atomic_store(&h_got, 0);
  atomic_store(&l1_has_a, 0);
  m_timed_out = 0;
  pthread_t l, l1 = 0, m;
  CHECK_EQ(pthread_create(&l, NULL, holder, chain ? mb : ma), 0);
  while (!atomic_load(&held)) sched_yield();
  if (chain) {
    CHECK_EQ(pthread_create(&l1, NULL, middle_owner, NULL), 0);
    while (!atomic_load(&l1_has_a)) sched_yield();
  }
  int err;
  m = rt_thread(mid, 10, &err);
  CHECK_EQ(err, 0);
  CHECK_EQ(pthread_join(m, NULL), 0);
  CHECK_EQ(pthread_join(l, NULL), 0);
  if (chain) CHECK_EQ(pthread_join(l1, NULL), 0);
  const char *name = chain ? "chain" : "direct";
  CHECK(!m_timed_out && h_got_seq < m_end_seq,
        "%s: H got the mutex only after M's %d s deadline (#%d, M ended #%d): no priority inherited",
        name, DEADLINE_S, h_got_seq, m_end_seq);
  CHECK(l_prio_work == -31, "%s: L computed at kernel priority %d while H (real-time 30) waited, not -31",
        name, l_prio_work);
  CHECK(l_prio_after == l_prio_before,
        "%s: L's kernel priority after its unlock is %d, not its own (%d): the inherited one stayed",
        name, l_prio_after, l_prio_before);
  printf("%s: H got the mutex while M spun\n", name);
}

int main(int argc, char **argv) {
  (void)argc;
  /* Pinned, and five steps nicer (up to 19), kept by the exec and by every
   * thread made from then on: a SCHED_OTHER thread's priority read below is
   * its own nice, also on a kernel thread a real-time one created (natively
   * each thread has its creator's nice; under goshim an M started from a
   * real-time M came up at nice 0, SCHED_RESET_ON_FORK's reset, and L's
   * reading after its unlock was 20 where its own was 25). */
  int rc = pin_one_cpu_reexec("MUTEX_PI_BOOST_PINNED", argv, 5);
  if (rc) return rc;
  /* A real-time thread that never blocks is killed (SIGXCPU, then SIGKILL)
   * rather than keep the CPU. */
  struct rlimit rl = {5000000, 6000000};
  setrlimit(RLIMIT_RTTIME, &rl);
  int err;
  pthread_t t = rt_thread(nothing, 10, &err);
  if (err) {
    fprintf(stderr, "SKIP: SCHED_FIFO not permitted here (%s)\n", strerror(err));
    return 77;
  }
  CHECK_EQ(pthread_join(t, NULL), 0);

  pthread_mutexattr_t at;
  CHECK_EQ(pthread_mutexattr_init(&at), 0);
  CHECK_EQ(pthread_mutexattr_setprotocol(&at, PTHREAD_PRIO_INHERIT), 0);
#if PI_PSHARED
  CHECK_EQ(pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED), 0);
  void *mem = mmap(NULL, 2 * sizeof(pthread_mutex_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(mem != MAP_FAILED, "mmap: %s", strerror(errno));
  ma = (pthread_mutex_t *)mem;
#else
  ma = &mstore[0];
#endif
  mb = ma + 1;
  CHECK_EQ(pthread_mutex_init(ma, &at), 0);
  CHECK_EQ(pthread_mutex_init(mb, &at), 0);
  phase(0);
  phase(1);
  phase_timeout();
#if PI_PSHARED
  phase_other_process();
#endif
  return 0;
}
