/* A signal a thread sends its own process (sigqueue, kill) or itself
 * (pthread_kill, pthread_sigqueue, raise) while every thread blocks it is
 * pending once the call has returned: sigpending() shows it, and a
 * sigtimedwait() with a zero timeout takes it at once; N real-time
 * instances queued that way are all taken by zero-timeout sigtimedwaits,
 * each signal's in sending order and the lower signal first. The kernel
 * makes a process signal pending before the call returns. Under goshim
 * another kernel thread of the runtime may take it from the kernel and
 * hold it for goshim: a zero-timeout sigtimedwait found 0-2 of 10 (the
 * rest arrived only with a 100 ms timeout). Each round runs from a second
 * thread (main blocked in pthread_join) and from main (a second thread
 * blocked in a read). ROUNDS (default 200), N instances (default 10);
 * TIMEOUT_MS (default 0) gives the takes a timeout instead (sigpending's
 * checks alone). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static int rounds_n, n_inst;
static int lo, hi; /* SIGRTMIN+1, SIGRTMIN+2 */
static struct timespec zero = {0, 0};

static int take0(int sig1, int sig2, siginfo_t *si) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, sig1);
  if (sig2) sigaddset(&s, sig2);
  return sigtimedwait(&s, si, &zero);
}

static void expect_pending(const char *who, int r, const char *how, int sig) {
  sigset_t p;
  CHECK_EQ(sigpending(&p), 0);
  CHECK(sigismember(&p, sig), "%s, round %d: signal %d not pending in sigpending() right after %s "
        "returned", who, r, sig, how);
}

/* Takes the one instance of sig the round sent and checks none is left. */
static void expect_one(const char *who, int r, const char *how, int sig) {
  siginfo_t si;
  int got = take0(sig, 0, &si);
  CHECK(got == sig, "%s, round %d: zero-timeout sigtimedwait after %s returned %d (errno %d), "
        "%d expected", who, r, how, got, got < 0 ? errno : 0, sig);
  errno = 0;
  got = take0(sig, 0, &si);
  CHECK(got == -1 && errno == EAGAIN, "%s, round %d: a second instance after %s: %d (errno %d)",
        who, r, how, got, errno);
}

static void rounds(const char *who) {
  for (int r = 0; r < rounds_n; r++) {
    /* sigqueue to the own process: N of each of two real-time signals,
     * interleaved; sigpending after the first send. */
    for (int i = 0; i < n_inst; i++) {
      union sigval v;
      v.sival_int = r * 1000 + i;
      CHECK_EQ(sigqueue(getpid(), hi, v), 0);
      if (i == 0) expect_pending(who, r, "sigqueue", hi);
      CHECK_EQ(sigqueue(getpid(), lo, v), 0);
    }
    siginfo_t si;
    for (int k = 0; k < 2; k++) {
      int sig = k ? hi : lo;
      for (int i = 0; i < n_inst; i++) {
        int got = take0(lo, hi, &si);
        CHECK(got == sig, "%s, round %d: zero-timeout sigtimedwait %d of %d for signal %d returned %d "
              "(errno %d)", who, r, k * n_inst + i + 1, 2 * n_inst, sig, got, got < 0 ? errno : 0);
        CHECK(si.si_code == SI_QUEUE && si.si_value.sival_int == r * 1000 + i,
              "%s, round %d: signal %d instance %d: code %d value %d, expected value %d", who, r, sig, i,
              si.si_code, si.si_value.sival_int, r * 1000 + i);
      }
    }
    errno = 0;
    int got = take0(lo, hi, &si);
    CHECK(got == -1 && errno == EAGAIN, "%s, round %d: more than %d instances: %d (errno %d)", who, r,
          2 * n_inst, got, errno);

    /* kill() of a standard signal, twice: one pending instance. */
    CHECK_EQ(kill(getpid(), SIGUSR1), 0);
    expect_pending(who, r, "kill", SIGUSR1);
    CHECK_EQ(kill(getpid(), SIGUSR1), 0);
    expect_one(who, r, "kill", SIGUSR1);

    /* To the calling thread itself. */
    CHECK_EQ(pthread_kill(pthread_self(), SIGUSR2), 0);
    expect_pending(who, r, "pthread_kill", SIGUSR2);
    expect_one(who, r, "pthread_kill", SIGUSR2);
    CHECK_EQ(raise(SIGUSR2), 0);
    expect_pending(who, r, "raise", SIGUSR2);
    expect_one(who, r, "raise", SIGUSR2);
    union sigval v;
    v.sival_int = r;
    CHECK_EQ(pthread_sigqueue(pthread_self(), hi, v), 0);
    expect_pending(who, r, "pthread_sigqueue", hi);
    expect_one(who, r, "pthread_sigqueue", hi);
  }
}

static void *worker(void *arg) {
  (void)arg;
  rounds("thread");
  return NULL;
}

static int pfd[2];
static void *reader(void *arg) {
  (void)arg;
  char c;
  CHECK_EQ(read(pfd[0], &c, 1), 1);
  return NULL;
}

int main(void) {
  rounds_n = env_int("ROUNDS", 200);
  n_inst = env_int("N", 10);
  int ms = env_int("TIMEOUT_MS", 0);
  zero.tv_sec = ms / 1000;
  zero.tv_nsec = (ms % 1000) * 1000000L;
  lo = SIGRTMIN + 1;
  hi = SIGRTMIN + 2;
  sigset_t blk;
  sigemptyset(&blk);
  sigaddset(&blk, lo);
  sigaddset(&blk, hi);
  sigaddset(&blk, SIGUSR1);
  sigaddset(&blk, SIGUSR2);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &blk, NULL), 0);

  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, worker, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);

  CHECK_EQ(pipe(pfd), 0);
  CHECK_EQ(pthread_create(&t, NULL, reader, NULL), 0);
  rounds("main");
  CHECK_EQ(write(pfd[1], "x", 1), 1);
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("ok: %d rounds of %d instances\n", rounds_n, n_inst);
  return 0;
}
