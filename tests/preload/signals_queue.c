/* Queueing of process-directed signals that no thread can take yet (every
 * thread blocks them), as the kernel does it:
 *   - a standard signal sent several times is delivered once;
 *   - each real-time signal sent with sigqueue is delivered, once per send,
 *     with its si_value, si_code and si_pid, in order of sending within a
 *     signal number and lower-numbered signals first;
 * both to an SA_SIGINFO handler (when main unblocks them) and to
 * sigwaitinfo in a dedicated thread (sent before it waits, and while it
 * waits, from this process and from another one). Thread-directed
 * real-time signals (pthread_sigqueue, pthread_kill) queue the same way. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define MAXREC 256
struct rec {
  int sig, code, value;
  int from_child;
};
static struct rec recs[MAXREC];
static atomic_int nrec;
static pid_t child_pid;

static void record(const siginfo_t *si) {
  int i = atomic_fetch_add(&nrec, 1);
  if (i >= MAXREC) return;
  recs[i].sig = si->si_signo;
  recs[i].code = si->si_code;
  recs[i].value = si->si_code == SI_QUEUE ? si->si_value.sival_int : -1;
  if (si->si_code == SI_TKILL) recs[i].from_child = 0;
  recs[i].from_child = si->si_pid == child_pid ? 1 : si->si_pid == getpid() ? 0 : -1;
}

static void on_sig(int sig, siginfo_t *si, void *uc) { record(si); }

static int sigs[4];
static sigset_t all4;

static atomic_int stop;
static void *busy(void *arg) {
  volatile unsigned long c = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) c++;
  return NULL;
}
static int pfd[2];
static void *parked(void *arg) {
  char c;
  return (void *)(long)read(pfd[0], &c, 1);
}

static void nap(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void send_q(pid_t to, int sig, int v) {
  union sigval sv = {.sival_int = v};
  CHECK_EQ(sigqueue(to, sig, sv), 0);
}

/* The mixed burst: RTMIN+2 and RTMIN+1 interleaved, SIGUSR1 three times,
   SIGUSR2 once. Sent by this process (base 0) or a child (base 100). */
static void burst(pid_t to, int base) {
  for (int i = 0; i < 6; i++) {
    send_q(to, sigs[3], base + 2 * i);
    send_q(to, sigs[2], base + 2 * i + 1);
    if (i < 3) CHECK_EQ(kill(to, SIGUSR1), 0);
  }
  CHECK_EQ(kill(to, SIGUSR2), 0);
}

/* Returns once all four signals are pending in the process. */
static void wait_all4_pending(void) {
  long long t0 = mono_ns_();
  for (;;) {
    sigset_t p;
    CHECK_EQ(sigpending(&p), 0);
    int n = 0;
    for (int i = 0; i < 4; i++) n += sigismember(&p, sigs[i]) == 1;
    if (n == 4) return;
    CHECK(mono_ns_() - t0 < 30000000000LL, "only %d of the signals sent are pending", n);
    sched_yield();
  }
}

static void burst_from_child(void) {
  pid_t parent = getpid();
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    burst(parent, 100);
    _exit(0);
  }
  child_pid = pid;
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
}

static void print_recs(const char *what) {
  int n = atomic_load(&nrec);
  printf("%s: %d deliveries\n", what, n);
  for (int i = 0; i < n && i < MAXREC; i++) {
    const char *name = recs[i].sig == SIGUSR1   ? "USR1"
                       : recs[i].sig == SIGUSR2 ? "USR2"
                       : recs[i].sig == sigs[2] ? "RTMIN+1"
                       : recs[i].sig == sigs[3] ? "RTMIN+2"
                                                : "?";
    printf("  %s code=%s value=%d from=%s\n", name,
           recs[i].code == SI_QUEUE  ? "SI_QUEUE"
           : recs[i].code == SI_USER ? "SI_USER"
                                     : "other",
           recs[i].value, recs[i].from_child == 1 ? "child" : recs[i].from_child == 0 ? "self" : "?");
  }
}

/* Checks the kernel's order: USR1 once, USR2 once, then RTMIN+1 values
   in sending order, then RTMIN+2 values in sending order. */
static void check_order(int base) {
  int n = atomic_load(&nrec);
  CHECK_EQ(n, 2 + 12);
  CHECK_EQ(recs[0].sig, SIGUSR1);
  CHECK_EQ(recs[1].sig, SIGUSR2);
  for (int i = 0; i < 6; i++) {
    CHECK_EQ(recs[2 + i].sig, sigs[2]);
    CHECK_EQ(recs[2 + i].value, base + 2 * i + 1);
    CHECK_EQ(recs[2 + i].code, SI_QUEUE);
    CHECK_EQ(recs[8 + i].sig, sigs[3]);
    CHECK_EQ(recs[8 + i].value, base + 2 * i);
  }
  for (int i = 0; i < n; i++) CHECK_EQ(recs[i].from_child, base ? 1 : 0);
}

static atomic_int waiter_go, waiter_done, waiter_tid;
static int waiter_want;
static void *waiter(void *arg) {
  while (!atomic_load(&waiter_go)) nap(1);
  atomic_store(&waiter_tid, self_tid());
  for (int i = 0; i < waiter_want; i++) {
    siginfo_t si;
    int s = sigwaitinfo(&all4, &si);
    CHECK(s > 0, "sigwaitinfo: %d errno %d", s, errno);
    CHECK_EQ(s, si.si_signo);
    record(&si);
  }
  atomic_store(&waiter_done, 1);
  return NULL;
}

static atomic_int td_go;
static int td_wait;
static void *td_thread(void *arg) {
  while (!atomic_load(&td_go)) nap(1);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sigs[2]);
  if (td_wait) {
    for (int i = 0; i < 8; i++) {
      siginfo_t si;
      CHECK_EQ(sigwaitinfo(&one, &si), sigs[2]);
      record(&si);
    }
  } else {
    CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &one, NULL), 0);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &one, NULL), 0);
  }
  return NULL;
}

int main(void) {
  sigs[0] = SIGUSR1;
  sigs[1] = SIGUSR2;
  sigs[2] = SIGRTMIN + 1;
  sigs[3] = SIGRTMIN + 2;
  sigemptyset(&all4);
  for (int i = 0; i < 4; i++) sigaddset(&all4, sigs[i]);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sig;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sa.sa_mask = all4; /* one handler at a time: the order is the dequeue order */
  for (int i = 0; i < 4; i++) CHECK_EQ(sigaction(sigs[i], &sa, NULL), 0);

  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &all4, NULL), 0);
  CHECK_EQ(pipe(pfd), 0);
  pthread_t b, p;
  CHECK_EQ(pthread_create(&b, NULL, busy, NULL), 0);
  CHECK_EQ(pthread_create(&p, NULL, parked, NULL), 0);

  /* 1. To a handler, when main unblocks them. */
  for (int from_child = 0; from_child <= 1; from_child++) {
    atomic_store(&nrec, 0);
    if (from_child)
      burst_from_child();
    else
      burst(getpid(), 0);
    nap(100); /* a window: a wrong delivery would show here */
    CHECK_EQ(atomic_load(&nrec), 0);
    sigset_t pend;
    CHECK_EQ(sigpending(&pend), 0);
    for (int i = 0; i < 4; i++) CHECK(sigismember(&pend, sigs[i]), "signal %d not pending", sigs[i]);
    CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &all4, NULL), 0);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &all4, NULL), 0);
    print_recs(from_child ? "handler, sent by a child" : "handler, sent by self");
    check_order(from_child ? 100 : 0);
  }

  /* 2. To sigwaitinfo, sent before the waiter waits. */
  for (int from_child = 0; from_child <= 1; from_child++) {
    atomic_store(&nrec, 0);
    atomic_store(&waiter_go, 0);
    atomic_store(&waiter_done, 0);
    waiter_want = 14;
    pthread_t w;
    CHECK_EQ(pthread_create(&w, NULL, waiter, NULL), 0);
    if (from_child)
      burst_from_child();
    else
      burst(getpid(), 0);
    wait_all4_pending(); /* sent before the waiter waits */
    atomic_store(&waiter_go, 1);
    CHECK_EQ(pthread_join(w, NULL), 0);
    print_recs(from_child ? "sigwaitinfo, sent by a child" : "sigwaitinfo, sent by self");
    check_order(from_child ? 100 : 0);
  }

  /* 3. To sigwaitinfo, sent while it waits (one at a time: the order is
     the sending order, every one delivered). */
  atomic_store(&nrec, 0);
  atomic_store(&waiter_go, 1);
  atomic_store(&waiter_done, 0);
  waiter_want = 20;
  atomic_store(&waiter_tid, 0);
  pthread_t w;
  CHECK_EQ(pthread_create(&w, NULL, waiter, NULL), 0);
  /* The waiter sleeps in sigwaitinfo. */
  while (!atomic_load(&waiter_tid)) nap(1);
  wait_tid_asleep(atomic_load(&waiter_tid), (const volatile int *)&waiter_done);
  for (int i = 0; i < 20; i++) send_q(getpid(), sigs[2 + (i & 1)], 200 + i);
  CHECK_EQ(pthread_join(w, NULL), 0);
  /* Per signal number, in sending order. */
  int last[2] = {-1, -1}, count[2] = {0, 0};
  for (int i = 0; i < 20; i++) {
    int k = recs[i].sig == sigs[2] ? 0 : 1;
    CHECK(recs[i].sig == sigs[2 + k], "unexpected signal %d", recs[i].sig);
    CHECK(recs[i].value > last[k], "value %d after %d", recs[i].value, last[k]);
    last[k] = recs[i].value;
    count[k]++;
  }
  CHECK_EQ(count[0], 10);
  CHECK_EQ(count[1], 10);
  printf("sigwaitinfo while waiting: 10 + 10 in order\n");

  /* 4. Thread-directed: pthread_sigqueue and pthread_kill of a real-time
     signal to a thread that blocks it queue too (each delivered, in
     order), when it unblocks it and when it sigwaits for it. */
  for (int use_wait = 0; use_wait <= 1; use_wait++) {
    atomic_store(&nrec, 0);
    atomic_store(&td_go, 0);
    td_wait = use_wait;
    pthread_t td;
    CHECK_EQ(pthread_create(&td, NULL, td_thread, NULL), 0);
    for (int i = 0; i < 6; i++) {
      union sigval sv = {.sival_int = 300 + i};
      CHECK_EQ(pthread_sigqueue(td, sigs[2], sv), 0);
      if (i == 2 || i == 4) CHECK_EQ(pthread_kill(td, sigs[2]), 0);
    }
    atomic_store(&td_go, 1);
    CHECK_EQ(pthread_join(td, NULL), 0);
    int n = atomic_load(&nrec);
    CHECK_EQ(n, 8);
    printf("thread-directed (%s):", use_wait ? "sigwaitinfo" : "handler");
    for (int i = 0; i < n; i++) {
      CHECK_EQ(recs[i].sig, sigs[2]);
      printf(" %s%d/%d", recs[i].code == SI_QUEUE ? "q" : recs[i].code == SI_TKILL ? "k" : "?", recs[i].code,
             recs[i].value);
    }
    printf("\n");
  }

  atomic_store(&stop, 1);
  CHECK_EQ(write(pfd[1], "x", 1), 1);
  CHECK_EQ(pthread_join(b, NULL), 0);
  CHECK_EQ(pthread_join(p, NULL), 0);
  printf("queued process signals delivered as natively\n");
  return 0;
}
