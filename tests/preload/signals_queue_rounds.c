/* The kernel's queueing of process-directed signals, round after round:
 * a burst is sent while every thread blocks the signals (three SIGUSR1,
 * one SIGUSR2, six sigqueue values each of SIGRTMIN+1 and SIGRTMIN+2,
 * interleaved), then taken at once, either by a handler as main unblocks
 * them or by sigwaitinfo in a new thread. Each round must see the kernel's
 * order: SIGUSR1 once (the two sent while it was pending merged with it),
 * SIGUSR2 once, then SIGRTMIN+1's values in sending order, then
 * SIGRTMIN+2's. Bursts come from this process and from a helper process.
 * Every other pair of rounds starts from the signals ignored, then at
 * their default action and open in main for a moment (a program setting
 * its dispositions per phase), and installs the handlers and blocks the
 * signals again just before its burst: the handlers are new when the
 * signals arrive, as in the first round. Other threads compute or sleep
 * meanwhile. (signals_queue checks the same
 * rules once each, with more shapes; this one repeats the two that a
 * signal taken by one thread while another delivers could break.) */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define ROUNDS 100
#define NREC 64
struct rec {
  int sig, value;
};
static struct rec recs[NREC];
static atomic_int nrec;
static int sigs[4];
static sigset_t all4;

static void record(const siginfo_t *si) {
  int i = atomic_fetch_add(&nrec, 1);
  if (i >= NREC) return;
  recs[i].sig = si->si_signo;
  recs[i].value = si->si_code == SI_QUEUE ? si->si_value.sival_int : -1;
}

static void on_sig(int sig, siginfo_t *si, void *uc) { record(si); }

static void set_all(void (*h)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = h;
  for (int i = 0; i < 4; i++) CHECK_EQ(sigaction(sigs[i], &sa, NULL), 0);
}

static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sig;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sa.sa_mask = all4; /* one handler at a time: the order is the dequeue order */
  for (int i = 0; i < 4; i++) CHECK_EQ(sigaction(sigs[i], &sa, NULL), 0);
}

/* Nothing is pending between rounds: the signals are ignored, then left
   at their default action and open for a moment, then handled and
   blocked again. */
static void new_handlers(void) {
  set_all(SIG_IGN);
  set_all(SIG_DFL);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &all4, NULL), 0);
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  install();
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &all4, NULL), 0);
}

static void burst(pid_t to, int base) {
  for (int i = 0; i < 6; i++) {
    union sigval v2 = {.sival_int = base + 2 * i}, v1 = {.sival_int = base + 2 * i + 1};
    CHECK_EQ(sigqueue(to, sigs[3], v2), 0);
    CHECK_EQ(sigqueue(to, sigs[2], v1), 0);
    if (i < 3) CHECK_EQ(kill(to, SIGUSR1), 0);
  }
  CHECK_EQ(kill(to, SIGUSR2), 0);
}

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

static void check_round(int round, const char *how, int base) {
  int n = atomic_load(&nrec);
  int ok = n == 14 && recs[0].sig == SIGUSR1 && recs[1].sig == SIGUSR2;
  for (int i = 0; ok && i < 6; i++)
    ok = recs[2 + i].sig == sigs[2] && recs[2 + i].value == base + 2 * i + 1 && recs[8 + i].sig == sigs[3] &&
         recs[8 + i].value == base + 2 * i;
  if (ok) return;
  fprintf(stderr, "round %d (%s): %d deliveries, not in the kernel's order:\n", round, how, n);
  for (int i = 0; i < n && i < NREC; i++)
    fprintf(stderr, "  %s %d\n",
            recs[i].sig == SIGUSR1   ? "USR1"
            : recs[i].sig == SIGUSR2 ? "USR2"
            : recs[i].sig == sigs[2] ? "RTMIN+1"
            : recs[i].sig == sigs[3] ? "RTMIN+2"
                                     : "?",
            recs[i].value);
  CHECK(0, "round %d", round);
}

static void *waiter(void *arg) {
  for (int i = 0; i < 14; i++) {
    siginfo_t si;
    int s = sigwaitinfo(&all4, &si);
    CHECK(s > 0, "sigwaitinfo: %d errno %d", s, errno);
    record(&si);
  }
  return NULL;
}

static atomic_int stop;
static void *busy(void *arg) {
  volatile unsigned long c = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) c++;
  return NULL;
}
static void *napper(void *arg) {
  while (!atomic_load(&stop)) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
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
  install();
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &all4, NULL), 0);

  /* The helper process: a burst to its parent for each byte it reads,
     then a byte back once it has sent it. */
  int cmd[2], ack[2];
  CHECK_EQ(pipe(cmd), 0);
  CHECK_EQ(pipe(ack), 0);
  pid_t parent = getpid();
  pid_t helper = fork();
  CHECK(helper >= 0, "fork");
  if (helper == 0) {
    close(cmd[1]);
    close(ack[0]);
    char c;
    while (read(cmd[0], &c, 1) == 1) {
      burst(parent, 100);
      if (write(ack[1], &c, 1) != 1) _exit(2);
    }
    _exit(0);
  }
  close(cmd[0]);
  close(ack[1]);

  pthread_t b, s;
  CHECK_EQ(pthread_create(&b, NULL, busy, NULL), 0);
  CHECK_EQ(pthread_create(&s, NULL, napper, NULL), 0);

  for (int round = 0; round < ROUNDS; round++) {
    int from_helper = round & 1, use_wait = (round >> 1) & 1, fresh = (round >> 2) & 1;
    atomic_store(&nrec, 0);
    if (fresh) new_handlers();
    if (from_helper) {
      char c = 'b';
      CHECK_EQ(write(cmd[1], &c, 1), 1);
      CHECK_EQ(read(ack[0], &c, 1), 1);
    } else {
      burst(getpid(), 0);
    }
    wait_all4_pending();
    CHECK_EQ(atomic_load(&nrec), 0);
    if (use_wait) {
      pthread_t w;
      CHECK_EQ(pthread_create(&w, NULL, waiter, NULL), 0);
      CHECK_EQ(pthread_join(w, NULL), 0);
    } else {
      CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &all4, NULL), 0);
      CHECK_EQ(pthread_sigmask(SIG_BLOCK, &all4, NULL), 0);
    }
    check_round(round, use_wait ? "sigwaitinfo" : "handler", from_helper ? 100 : 0);
    sigset_t p;
    CHECK_EQ(sigpending(&p), 0);
    for (int i = 0; i < 4; i++) CHECK(!sigismember(&p, sigs[i]), "round %d: signal %d still pending", round, sigs[i]);
  }

  close(cmd[1]);
  int st;
  CHECK_EQ(waitpid(helper, &st, 0), helper);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "helper status %#x", st);
  atomic_store(&stop, 1);
  CHECK_EQ(pthread_join(b, NULL), 0);
  CHECK_EQ(pthread_join(s, NULL), 0);
  printf("%d rounds in the kernel's order\n", ROUNDS);
  return 0;
}
