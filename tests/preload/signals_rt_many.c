/* Many real-time signals held at once, as the kernel holds them (up to
 * RLIMIT_SIGPENDING, far above what this test queues):
 *   - 21 different real-time signals raised while blocked, highest first,
 *     and 100 pthread_sigqueue values of one of them: every send succeeds,
 *     and unblocking delivers them lowest signal number first, the values
 *     of one signal in sending order;
 *   - 150 values queued with pthread_sigqueue to another thread that
 *     blocks the signal, then taken with sigwaitinfo in order;
 *   - 200 values the process sends itself with sigqueue while every thread
 *     blocks the signal (a handler is installed), all sent before main
 *     takes them with sigwaitinfo: all there, in sending order. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "common.h"

#define NREC 1024
static int rec_sig[NREC], rec_val[NREC];
static volatile int nrec;

static void on_rt(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  int i = nrec++;
  if (i < NREC) {
    rec_sig[i] = sig;
    rec_val[i] = si->si_code == SI_QUEUE ? si->si_value.sival_int : -1;
  }
}

static void install(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_rt;
  sa.sa_flags = SA_SIGINFO;
  sigfillset(&sa.sa_mask);
  CHECK_EQ(sigaction(sig, &sa, NULL), 0);
}

static void raised_many(void) {
  int lo = SIGRTMIN, hi = SIGRTMIN + 20, mid = SIGRTMIN + 3;
  sigset_t s;
  sigemptyset(&s);
  for (int sig = lo; sig <= hi; sig++) {
    install(sig);
    sigaddset(&s, sig);
  }
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  nrec = 0;
  for (int sig = hi; sig >= lo; sig--) CHECK_EQ(raise(sig), 0);
  for (int v = 0; v < 100; v++) {
    union sigval sv = {.sival_int = v};
    CHECK_EQ(pthread_sigqueue(pthread_self(), mid, sv), 0);
  }
  CHECK_EQ(nrec, 0);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
  CHECK_EQ(nrec, 121);
  /* lo, lo+1, lo+2, mid (raised: no value) then its 100 values, mid+1.. */
  int i = 0;
  for (int sig = lo; sig <= hi; sig++) {
    CHECK(rec_sig[i] == sig, "delivery %d: signal %d, expected %d", i, rec_sig[i], sig);
    CHECK_EQ(rec_val[i], -1);
    i++;
    if (sig == mid)
      for (int v = 0; v < 100; v++, i++) {
        CHECK(rec_sig[i] == mid && rec_val[i] == v, "delivery %d: signal %d value %d, expected %d value %d", i,
              rec_sig[i], rec_val[i], mid, v);
      }
  }
  printf("raised: 121 delivered in order\n");
}

static int ready[2], go[2];
static void *waiter(void *arg) {
  int sig = (int)(long)arg;
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, sig);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  char c = 1;
  CHECK_EQ(write(ready[1], &c, 1), 1);
  /* Main's word: all are queued. */
  CHECK_EQ(read(go[0], &c, 1), 1);
  for (int v = 0; v < 150; v++) {
    siginfo_t si;
    CHECK_EQ(sigwaitinfo(&s, &si), sig);
    CHECK_EQ(si.si_code, SI_QUEUE);
    CHECK(si.si_value.sival_int == v, "sigwaitinfo %d: value %d", v, si.si_value.sival_int);
  }
  sigset_t p;
  CHECK_EQ(sigpending(&p), 0);
  CHECK(!sigismember(&p, sig), "still pending after 150");
  return NULL;
}

static void queued_to_thread(void) {
  int sig = SIGRTMIN + 6;
  install(sig);
  CHECK_EQ(pipe(ready), 0);
  CHECK_EQ(pipe(go), 0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, waiter, (void *)(long)sig), 0);
  char c;
  CHECK_EQ(read(ready[0], &c, 1), 1);
  for (int v = 0; v < 150; v++) {
    union sigval sv = {.sival_int = v};
    CHECK_EQ(pthread_sigqueue(t, sig, sv), 0);
  }
  CHECK_EQ(write(go[1], &c, 1), 1);
  CHECK_EQ(pthread_join(t, NULL), 0);
  CHECK_EQ(nrec, 0);
  printf("thread: 150 taken in order\n");
}

static void process_held(void) {
  int sig = SIGRTMIN + 8;
  install(sig);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, sig);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  nrec = 0;
  for (int v = 0; v < 200; v++) {
    union sigval sv = {.sival_int = v};
    CHECK_EQ(sigqueue(getpid(), sig, sv), 0);
  }
  CHECK_EQ(nrec, 0);
  sigset_t p;
  CHECK_EQ(sigpending(&p), 0);
  CHECK(sigismember(&p, sig), "not pending");
  for (int v = 0; v < 200; v++) {
    siginfo_t si;
    CHECK_EQ(sigwaitinfo(&s, &si), sig);
    CHECK_EQ(si.si_code, SI_QUEUE);
    CHECK_EQ(si.si_pid, getpid());
    CHECK(si.si_value.sival_int == v, "sigwaitinfo %d: value %d", v, si.si_value.sival_int);
  }
  CHECK_EQ(sigpending(&p), 0);
  CHECK(!sigismember(&p, sig), "still pending after 200");
  CHECK_EQ(nrec, 0);
  printf("process: 200 taken in order\n");
}

int main(void) {
  /* First, while main is the only thread (no other thread that leaves the
   * signal open can have taken one out of order). */
  process_held();
  nrec = 0;
  raised_many();
  nrec = 0;
  queued_to_thread();
  return 0;
}
