/* A zero-timeout ppoll() or pselect() whose mask opens a signal the thread
 * blocks, right after the thread sent that signal to its own process
 * (sigqueue, kill) or to itself (pthread_kill): the signal is pending when
 * the send returns, so the call fails with EINTR after its handler ran, as
 * the kernel does when no descriptor is ready. With a descriptor ready it
 * returns that count instead and the signal stays pending (sigpending, a
 * zero-timeout sigtimedwait takes it). epoll_pwait with a zero timeout
 * answers 0 and leaves the signal pending (the kernel looks at signals
 * only once it would sleep). Under goshim sysmon, which receives the
 * signals a thread handles, took the process signal from the kernel before
 * the call set the mask on its kernel thread: ppoll and pselect returned 0
 * without the handler in every round. Each round from a second thread
 * (main blocked in pthread_join) and from main. ROUNDS (default 200). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static volatile sig_atomic_t handled[65];
static void on_sig(int sig) { handled[sig]++; }

static int rt;
static const struct timespec zero = {0, 0};
static sigset_t none;

static void send(int how, int sig, int r) {
  union sigval v;
  v.sival_int = r;
  switch (how) {
    case 0: CHECK_EQ(sigqueue(getpid(), sig, v), 0); break;
    case 1: CHECK_EQ(kill(getpid(), sig), 0); break;
    default: CHECK_EQ(pthread_kill(pthread_self(), sig), 0); break;
  }
}

static const char *how_name[] = {"sigqueue", "kill", "pthread_kill"};

static void expect_pending_take(const char *who, int r, const char *what, int sig) {
  sigset_t p, s;
  CHECK_EQ(sigpending(&p), 0);
  CHECK(sigismember(&p, sig), "%s, round %d: %s: signal %d not pending", who, r, what, sig);
  sigemptyset(&s);
  sigaddset(&s, sig);
  siginfo_t si;
  int got = sigtimedwait(&s, &si, &zero);
  CHECK(got == sig, "%s, round %d: %s: zero-timeout sigtimedwait %d (errno %d)", who, r, what, got,
        got < 0 ? errno : 0);
}

static void rounds(const char *who) {
  int pfd[2];
  CHECK_EQ(pipe(pfd), 0);
  CHECK_EQ(write(pfd[1], "x", 1), 1);  /* pfd[0] stays readable */
  int ep = epoll_create1(0);
  CHECK(ep >= 0, "epoll_create1");
  struct epoll_event ev;
  for (int r = 0; r < env_int("ROUNDS", 200); r++) {
    for (int how = 0; how < 3; how++) {
      int sig = how == 0 ? rt : how == 1 ? SIGUSR1 : SIGUSR2;
      /* No descriptor ready: EINTR once the handler ran. */
      for (int call = 0; call < 2; call++) {
        int h0 = handled[sig];
        send(how, sig, r);
        errno = 0;
        int got = call == 0 ? ppoll(NULL, 0, &zero, &none) : pselect(0, NULL, NULL, NULL, &zero, &none);
        int e = errno;
        CHECK(got == -1 && e == EINTR && handled[sig] == h0 + 1,
              "%s, round %d: %s after %s of signal %d: returned %d (errno %d), %d handlers ran, 1 expected",
              who, r, call == 0 ? "ppoll" : "pselect", how_name[how], sig, got, e, handled[sig] - h0);
      }
      /* A descriptor ready: its count, the signal still pending. */
      int h0 = handled[sig];
      send(how, sig, r);
      struct pollfd p = {pfd[0], POLLIN, 0};
      int got = ppoll(&p, 1, &zero, &none);
      CHECK(got == 1 && (p.revents & POLLIN), "%s, round %d: ppoll with a ready pipe after %s: %d", who, r,
            how_name[how], got);
      expect_pending_take(who, r, "after a ppoll that found a descriptor ready", sig);
      send(how, sig, r);
      fd_set rs;
      FD_ZERO(&rs);
      FD_SET(pfd[0], &rs);
      got = pselect(pfd[0] + 1, &rs, NULL, NULL, &zero, &none);
      CHECK(got == 1 && FD_ISSET(pfd[0], &rs), "%s, round %d: pselect with a ready pipe after %s: %d",
            who, r, how_name[how], got);
      expect_pending_take(who, r, "after a pselect that found a descriptor ready", sig);
      /* epoll_pwait, nothing ready: 0, the signal still pending. */
      send(how, sig, r);
      got = epoll_pwait(ep, &ev, 1, 0, &none);
      CHECK(got == 0, "%s, round %d: epoll_pwait after %s: %d (errno %d)", who, r, how_name[how], got,
            got < 0 ? errno : 0);
      expect_pending_take(who, r, "after a zero-timeout epoll_pwait", sig);
      CHECK(handled[sig] == h0, "%s, round %d: %d handlers ran where the signal stayed pending", who, r,
            handled[sig] - h0);
    }
  }
  close(pfd[0]);
  close(pfd[1]);
  close(ep);
}

static void *worker(void *arg) {
  (void)arg;
  rounds("thread");
  return NULL;
}

int main(void) {
  rt = SIGRTMIN + 2;
  sigemptyset(&none);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sig;
  CHECK_EQ(sigaction(rt, &sa, NULL), 0);
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
  sigset_t blk;
  sigemptyset(&blk);
  sigaddset(&blk, rt);
  sigaddset(&blk, SIGUSR1);
  sigaddset(&blk, SIGUSR2);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &blk, NULL), 0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, worker, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  rounds("main");
  printf("ok\n");
  return 0;
}
