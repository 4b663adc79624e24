/* Real-time scheduling is applied, not only recorded. The process pins
 * itself to one CPU (it sets its affinity and re-executes itself, so that
 * every thread, present and future, has it), then:
 *
 *  - SCHED_OTHER spinners count without end; a SCHED_FIFO thread created
 *    with an explicit attribute runs to completion before pthread_create
 *    returns in its SCHED_OTHER creator, and no spinner counts meanwhile;
 *  - two SCHED_FIFO threads of one priority alternate through sched_yield
 *    (the kernel's FIFO order), with no spinner running in between;
 *  - a SCHED_OTHER thread switches itself to SCHED_FIFO (pthread_setschedparam,
 *    then sched_setscheduler), reads its parameters back (pthread_getschedparam,
 *    sched_getscheduler, sched_getparam, pthread_setschedprio) and runs ahead
 *    of the spinners; back to SCHED_OTHER, it shares the CPU with them again;
 *  - threads blocked on a mutex get it in priority order;
 *  - priority-protect mutexes raise a SCHED_FIFO owner's kernel priority to
 *    their ceiling and restore it, and fail (EINVAL) for SCHED_OTHER callers;
 *  - errors: EINVAL for bad priorities and policies; EPERM without the
 *    privilege (a forked child drops root and sets RLIMIT_RTPRIO), and the
 *    RLIMIT_RTPRIO bound itself.
 *
 * Progress is counted, never timed. Every real-time loop is bounded, and
 * RLIMIT_RTTIME kills a real-time thread that would keep the CPU. Exits 77
 * (skip) when real-time scheduling is not permitted here. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define NSPIN 3
#define WORK 3000000L /* iterations of a real-time loop: a few ms */

static _Atomic long counter[NSPIN];
static atomic_int stop;

static void *spinner(void *arg) {
  long i = (long)arg;
  while (!atomic_load_explicit(&stop, memory_order_relaxed))
    atomic_fetch_add_explicit(&counter[i], 1, memory_order_relaxed);
  return NULL;
}

static void snapshot(long *s) {
  for (int i = 0; i < NSPIN; i++) s[i] = atomic_load_explicit(&counter[i], memory_order_relaxed);
}

static int same(const long *a, const long *b) {
  for (int i = 0; i < NSPIN; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

/* Runs WORK iterations; returns how many times a spinner was seen to move. */
static long rt_work(void) {
  long s0[NSPIN], s[NSPIN], moved = 0;
  snapshot(s0);
  for (long k = 0; k < WORK; k++) {
    if (k % 64 == 0) {
      snapshot(s);
      if (!same(s, s0)) {
        moved++;
        memcpy(s0, s, sizeof s);
      }
    }
  }
  return moved;
}

/* Waits (yielding) until every spinner has counted since s. */
static void wait_spinners_moved(const long *s) {
  long now[NSPIN];
  for (;;) {
    snapshot(now);
    int all = 1;
    for (int i = 0; i < NSPIN; i++)
      if (now[i] == s[i]) all = 0;
    if (all) return;
    sched_yield();
  }
}

static pthread_attr_t fifo_attr(int prio) {
  pthread_attr_t a;
  struct sched_param sp = {.sched_priority = prio};
  pthread_attr_init(&a);
  CHECK_EQ(pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED), 0);
  CHECK_EQ(pthread_attr_setschedpolicy(&a, SCHED_FIFO), 0);
  CHECK_EQ(pthread_attr_setschedparam(&a, &sp), 0);
  return a;
}

/* ---- a real-time thread created with an explicit attribute ---------------- */

static atomic_int fifo_done;
static long fifo_moved = -1;

static void *fifo_thread(void *arg) {
  int policy;
  struct sched_param sp;
  CHECK_EQ(pthread_getschedparam(pthread_self(), &policy, &sp), 0);
  CHECK_EQ(policy, SCHED_FIFO);
  CHECK_EQ(sp.sched_priority, 10);
  CHECK_EQ(sched_getscheduler(0), SCHED_FIFO);
  fifo_moved = rt_work();
  atomic_store(&fifo_done, 1);
  return NULL;
}

static void *noop(void *arg) { return arg; }

/* ---- sched_yield between two FIFO threads of one priority ------------------ */

#define ROUNDS 5
static char order[4 * ROUNDS + 8];
static atomic_int norder;
static long yield_moved;

static void note(char c) { order[atomic_fetch_add(&norder, 1)] = c; }

static void *yielder_b(void *arg) {
  long s0[NSPIN], s[NSPIN];
  snapshot(s0);
  for (int r = 0; r < ROUNDS; r++) {
    note('b');
    sched_yield();
  }
  snapshot(s);
  if (!same(s, s0)) yield_moved++;
  return NULL;
}

static void *yielder_a(void *arg) {
  long s0[NSPIN], s[NSPIN];
  pthread_attr_t a = fifo_attr(10);
  pthread_t b;
  note('A');
  CHECK_EQ(pthread_create(&b, &a, yielder_b, NULL), 0);
  snapshot(s0);
  note('a'); /* same priority: b waits for a to yield */
  for (int r = 0; r < ROUNDS; r++) {
    sched_yield();
    note('a');
  }
  CHECK_EQ(pthread_join(b, NULL), 0);
  note('J');
  snapshot(s);
  if (!same(s, s0)) yield_moved++;
  return NULL;
}

/* ---- a running thread switches to SCHED_FIFO and back ----------------------- */

static long sw_moved_fifo = -1, sw_moved_fifo2 = -1;
static int sw_moved_other = 0;

static void *switcher(void *arg) {
  int policy;
  struct sched_param sp = {.sched_priority = 0};
  CHECK_EQ(pthread_getschedparam(pthread_self(), &policy, &sp), 0);
  CHECK_EQ(policy, SCHED_OTHER);
  CHECK_EQ(sp.sched_priority, 0);
  /* bad values change nothing */
  sp.sched_priority = 0;
  CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp), EINVAL);
  sp.sched_priority = 100;
  CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_RR, &sp), EINVAL);
  sp.sched_priority = 5;
  CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp), EINVAL);
  CHECK_EQ(pthread_setschedparam(pthread_self(), 42, &sp), EINVAL);
  errno = 0;
  CHECK_EQ(sched_setscheduler(0, SCHED_FIFO, &(struct sched_param){.sched_priority = 0}), -1);
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(pthread_setschedprio(pthread_self(), 3), EINVAL);
  CHECK_EQ(sched_getscheduler(0), SCHED_OTHER);

  /* SCHED_OTHER -> SCHED_FIFO 10: from here on the spinners wait */
  sp.sched_priority = 10;
  CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp), 0);
  CHECK_EQ(pthread_getschedparam(pthread_self(), &policy, &sp), 0);
  CHECK_EQ(policy, SCHED_FIFO);
  CHECK_EQ(sp.sched_priority, 10);
  CHECK_EQ(sched_getscheduler(0), SCHED_FIFO);
  sw_moved_fifo = rt_work();
  CHECK_EQ(pthread_setschedprio(pthread_self(), 12), 0);
  CHECK_EQ(pthread_getschedparam(pthread_self(), &policy, &sp), 0);
  CHECK_EQ(policy, SCHED_FIFO);
  CHECK_EQ(sp.sched_priority, 12);
  CHECK_EQ(sched_getparam(0, &sp), 0);
  CHECK_EQ(sp.sched_priority, 12);
  sp.sched_priority = 200;
  CHECK_EQ(pthread_setschedprio(pthread_self(), 200), EINVAL);
  CHECK_EQ(sched_getparam(0, &sp), 0);
  CHECK_EQ(sp.sched_priority, 12);

  /* back to SCHED_OTHER: the spinners share the CPU again */
  sp.sched_priority = 0;
  CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp), 0);
  CHECK_EQ(pthread_getschedparam(pthread_self(), &policy, &sp), 0);
  CHECK_EQ(policy, SCHED_OTHER);
  CHECK_EQ(sched_getscheduler(0), SCHED_OTHER);
  long s0[NSPIN];
  snapshot(s0);
  wait_spinners_moved(s0);
  sw_moved_other = 1;

  /* again, through sched_setscheduler on the calling thread */
  sp.sched_priority = 20;
  CHECK_EQ(sched_setscheduler(0, SCHED_RR, &sp), 0);
  /* (pthread_getschedparam would give glibc's cached values: not asked) */
  CHECK_EQ(sched_getscheduler(0), SCHED_RR);
  CHECK_EQ(sched_getparam(0, &sp), 0);
  CHECK_EQ(sp.sched_priority, 20);
  sw_moved_fifo2 = rt_work();
  sp.sched_priority = 0;
  CHECK_EQ(sched_setscheduler(0, SCHED_OTHER, &sp), 0);
  CHECK_EQ(sched_getscheduler(0), SCHED_OTHER);
  snapshot(s0);
  wait_spinners_moved(s0);
  return NULL;
}

/* ---- waiters are woken by priority ------------------------------------------------ */

static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static int got_order[3];
static int ngot;

static void *prio_waiter(void *arg) {
  CHECK_EQ(pthread_mutex_lock(&order_mu), 0); /* blocks: main holds it */
  got_order[ngot++] = (int)(long)arg;
  CHECK_EQ(pthread_mutex_unlock(&order_mu), 0);
  return NULL;
}

static void wake_order(void) {
  static const int prios[3] = {5, 20, 10};
  pthread_t t[3];
  CHECK_EQ(pthread_mutex_lock(&order_mu), 0);
  /* each runs ahead of main (SCHED_OTHER) until it blocks on the mutex */
  for (int i = 0; i < 3; i++) {
    pthread_attr_t a = fifo_attr(prios[i]);
    CHECK_EQ(pthread_create(&t[i], &a, prio_waiter, (void *)(long)prios[i]), 0);
  }
  CHECK_EQ(pthread_mutex_unlock(&order_mu), 0);
  for (int i = 0; i < 3; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  printf("mutex waiters woken in order: %d %d %d\n", got_order[0], got_order[1], got_order[2]);
}

/* ---- priority protection ------------------------------------------------------ */

static pthread_mutex_t pp20, pp30;

static int kernel_prio(void) {
  struct sched_param sp;
  CHECK_EQ(sched_getparam(0, &sp), 0);
  return sp.sched_priority;
}

static void *pp_other(void *arg) {
  /* glibc raises the caller to the ceiling: not possible for SCHED_OTHER */
  CHECK_EQ(pthread_mutex_lock(&pp20), EINVAL);
  return NULL;
}

static void *pp_fifo(void *arg) {
  int policy;
  struct sched_param sp;
  CHECK_EQ(kernel_prio(), 10);
  CHECK_EQ(pthread_mutex_lock(&pp20), 0);
  CHECK_EQ(kernel_prio(), 20); /* raised to the ceiling */
  CHECK_EQ(pthread_getschedparam(pthread_self(), &policy, &sp), 0);
  CHECK_EQ(sp.sched_priority, 10); /* its own priority is unchanged */
  CHECK_EQ(pthread_mutex_lock(&pp30), 0);
  CHECK_EQ(kernel_prio(), 30);
  CHECK_EQ(pthread_mutex_unlock(&pp30), 0);
  CHECK_EQ(kernel_prio(), 20);
  sp.sched_priority = 15;
  CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp), 0);
  CHECK_EQ(kernel_prio(), 20); /* still held: the ceiling wins */
  CHECK_EQ(pthread_mutex_unlock(&pp20), 0);
  CHECK_EQ(kernel_prio(), 15);
  CHECK_EQ(pthread_mutex_trylock(&pp20), 0);
  CHECK_EQ(kernel_prio(), 20);
  CHECK_EQ(pthread_mutex_unlock(&pp20), 0);
  CHECK_EQ(kernel_prio(), 15);
  /* the caller's priority above the ceiling */
  sp.sched_priority = 25;
  CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp), 0);
  CHECK_EQ(pthread_mutex_lock(&pp20), EINVAL);
  CHECK_EQ(pthread_mutex_trylock(&pp20), EINVAL);
  CHECK_EQ(kernel_prio(), 25);
  return NULL;
}

static void priority_protect(void) {
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  CHECK_EQ(pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_PROTECT), 0);
  CHECK_EQ(pthread_mutexattr_setprioceiling(&ma, 20), 0);
  CHECK_EQ(pthread_mutex_init(&pp20, &ma), 0);
  CHECK_EQ(pthread_mutexattr_setprioceiling(&ma, 30), 0);
  CHECK_EQ(pthread_mutex_init(&pp30, &ma), 0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, pp_other, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  pthread_attr_t a = fifo_attr(10);
  CHECK_EQ(pthread_create(&t, &a, pp_fifo, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("priority protect: ok\n");
}

/* ---- signal mask of a real-time thread ---------------------------------------- */

static atomic_int usr1_handled;
static pthread_t usr1_thread;
static void on_usr1(int sig) {
  usr1_thread = pthread_self();
  atomic_store(&usr1_handled, 1);
}

static void *masker(void *arg) {
  sigset_t s, old;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, &old), 0);
  CHECK_EQ(sigismember(&old, SIGUSR1), 0);
  CHECK_EQ(kill(getpid(), SIGUSR1), 0);
  /* another thread takes it: sleep (giving the CPU away) until it did */
  for (int i = 0; i < 5000 && !atomic_load(&usr1_handled); i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  CHECK(atomic_load(&usr1_handled), "SIGUSR1 not handled");
  CHECK(!pthread_equal(usr1_thread, pthread_self()), "handled by the thread that blocks it");
  CHECK_EQ(pthread_sigmask(SIG_SETMASK, NULL, &old), 0);
  CHECK_EQ(sigismember(&old, SIGUSR1), 1);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
  return NULL;
}

static void signal_mask(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  pthread_attr_t a = fifo_attr(10);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, &a, masker, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("signal mask of a SCHED_FIFO thread: ok\n");
}

/* ---- privilege --------------------------------------------------------------- */

static int unpriv_child(void) {
  struct rlimit rl = {0, 0};
  if (setrlimit(RLIMIT_RTPRIO, &rl) != 0) return 2;
  if (setgid(65534) != 0 || setuid(65534) != 0) return 3;
  pthread_attr_t a = fifo_attr(10);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, &a, noop, NULL), EPERM);
  struct sched_param sp = {.sched_priority = 10};
  CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp), EPERM);
  errno = 0;
  CHECK_EQ(sched_setscheduler(0, SCHED_RR, &sp), -1);
  CHECK_EQ(errno, EPERM);
  int policy;
  CHECK_EQ(pthread_getschedparam(pthread_self(), &policy, &sp), 0);
  CHECK_EQ(policy, SCHED_OTHER);
  CHECK_EQ(sp.sched_priority, 0);
  CHECK_EQ(sched_getscheduler(0), SCHED_OTHER);
  /* still EINVAL first for a bad priority */
  sp.sched_priority = 0;
  CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp), EINVAL);
  return 0;
}

static void *limited(void *arg) {
  int policy;
  struct sched_param sp;
  CHECK_EQ(pthread_getschedparam(pthread_self(), &policy, &sp), 0);
  CHECK_EQ(policy, SCHED_FIFO);
  CHECK_EQ(sp.sched_priority, 5);
  sp.sched_priority = 6; /* above the limit */
  CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp), EPERM);
  sp.sched_priority = 4; /* lowering is allowed */
  CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp), 0);
  return NULL;
}

static int rlimit_child(void) {
  struct rlimit rl = {5, 5};
  if (setrlimit(RLIMIT_RTPRIO, &rl) != 0) return 2;
  if (setgid(65534) != 0 || setuid(65534) != 0) return 3;
  pthread_attr_t a = fifo_attr(6);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, &a, noop, NULL), EPERM);
  a = fifo_attr(5);
  CHECK_EQ(pthread_create(&t, &a, limited, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  return 0;
}

static void in_child(int (*fn)(void), const char *what) {
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) _exit(fn());
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s child: status %#x", what, st);
  printf("%s: ok\n", what);
}

/* ---- main ------------------------------------------------------------------ */

static void pin_and_reexec(char **argv) {
  cpu_set_t set;
  CHECK_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &set)) cpu++;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  CHECK_EQ(sched_setaffinity(0, sizeof set, &set), 0);
  setenv("RT_FIFO_PINNED", "1", 1);
  execv("/proc/self/exe", argv);
  CHECK(0, "execv: %s", strerror(errno));
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!getenv("RT_FIFO_PINNED")) pin_and_reexec(argv);
  cpu_set_t set;
  CHECK_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  CHECK_EQ(CPU_COUNT(&set), 1);
  /* A real-time thread that keeps the CPU for 0.5 s without blocking is killed. */
  struct rlimit rt = {500000, 500000};
  CHECK_EQ(setrlimit(RLIMIT_RTTIME, &rt), 0);

  pthread_attr_t a = fifo_attr(10);
  pthread_t t;
  int r = pthread_create(&t, &a, noop, NULL);
  if (r == EPERM) {
    fprintf(stderr, "SKIP: real-time scheduling not permitted\n");
    return 77;
  }
  CHECK_EQ(r, 0);
  CHECK_EQ(pthread_join(t, NULL), 0);

  pthread_t sp[NSPIN];
  for (long i = 0; i < NSPIN; i++) CHECK_EQ(pthread_create(&sp[i], NULL, spinner, (void *)i), 0);
  long zero[NSPIN] = {0};
  wait_spinners_moved(zero);

  /* 1. explicit attribute: runs to completion before pthread_create returns */
  long s0[NSPIN];
  CHECK_EQ(pthread_create(&t, &a, fifo_thread, NULL), 0);
  int done_at_return = atomic_load(&fifo_done);
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("fifo thread: done when pthread_create returned: %d, spinner progress seen: %ld\n",
         done_at_return, fifo_moved);
  snapshot(s0);
  wait_spinners_moved(s0);

  /* 2. sched_yield between two FIFO threads of one priority */
  CHECK_EQ(pthread_create(&t, &a, yielder_a, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  order[atomic_load(&norder)] = 0;
  printf("yield order: %s, spinner progress seen: %ld\n", order, yield_moved);
  snapshot(s0);
  wait_spinners_moved(s0);

  /* 3. switching a running thread */
  CHECK_EQ(pthread_create(&t, NULL, switcher, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("switch: as SCHED_FIFO progress seen: %ld; as SCHED_OTHER: %d; as SCHED_RR: %ld\n",
         sw_moved_fifo, sw_moved_other, sw_moved_fifo2);

  atomic_store(&stop, 1);
  for (int i = 0; i < NSPIN; i++) CHECK_EQ(pthread_join(sp[i], NULL), 0);

  wake_order();
  priority_protect();
  signal_mask();

  /* 4. privilege */
  in_child(unpriv_child, "no privilege: EPERM");
  struct rlimit cur;
  CHECK_EQ(getrlimit(RLIMIT_RTPRIO, &cur), 0);
  struct rlimit five = {5, 5};
  if (cur.rlim_max >= 5 || setrlimit(RLIMIT_RTPRIO, &five) == 0 || errno != EPERM) {
    CHECK_EQ(setrlimit(RLIMIT_RTPRIO, &cur), 0);
    in_child(rlimit_child, "RLIMIT_RTPRIO 5");
  } else {
    printf("RLIMIT_RTPRIO 5: not tested (the hard limit cannot be raised here)\n");
  }
  printf("done\n");
  return 0;
}
