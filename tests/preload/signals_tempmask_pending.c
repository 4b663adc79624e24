/* Signals pending and blocked when a call with a temporary signal mask
 * opens them. Each thread blocks SIGUSR1 and SIGUSR2, raises both, then
 * calls one of:
 *   ppoll and pselect with a zero timeout, ppoll and epoll_pwait with a
 *   10 s timeout, and sigsuspend, each with a mask that opens both, on an
 *   empty pipe:
 *     -1/EINTR and both handlers ran on the thread before the call
 *     returned (ppoll(2), pselect(2): the kernel looks for a pending
 *     signal when no descriptor is ready, also at a zero timeout; both
 *     frames are pushed on the way out, SIGUSR2's over SIGUSR1's, so
 *     natively SIGUSR2's handler runs first: not checked);
 *   the same ppoll (zero timeout, then 10 s) on a pipe with data: 1, no
 *     handler, both still pending (a ready descriptor is the answer; the
 *     thread's mask is back before any handler could run);
 *   epoll_pwait with a zero timeout: 0, no handler, both pending (the
 *     kernel's epoll returns at once at a zero timeout without looking at
 *     signals).
 * On the main thread and a second thread. goshim made a goroutine's
 * zero-timeout ppoll/pselect a plain kernel call with the mask on its M,
 * where the G's pending signals are not: 0 and no handler; and a
 * goroutine's ppoll with a timeout ran the handlers and returned EINTR
 * although the pipe had data. (A thread goshim does not run, started
 * before main, is not checked: there goshim's handler entry starts from the
 * thread's own mask, not the call's temporary one, and SIGUSR2 stays
 * pending after the call: LD_PRELOAD.md 7.19.) */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>

#include "common.h"

static __thread volatile int order[4], nran;

static void on_sig(int sig) {
  if (nran < 4) order[nran] = sig;
  nran++;
}

enum { PPOLL0, PSELECT0, PPOLL_T, EPOLL_T, SIGSUSPEND, PPOLL0_READY, PPOLL_T_READY, EPOLL0, NKINDS };
static const char *const names[NKINDS] = {
    "ppoll, zero timeout",       "pselect, zero timeout",     "ppoll, 10 s timeout",
    "epoll_pwait, 10 s timeout", "sigsuspend",                "ppoll, zero timeout, data",
    "ppoll, 10 s timeout, data", "epoll_pwait, zero timeout"};

static void one(const char *who, int kind) {
  sigset_t both, open, was, pend;
  sigemptyset(&both);
  sigaddset(&both, SIGUSR1);
  sigaddset(&both, SIGUSR2);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &both, &was), 0);
  CHECK(!sigismember(&was, SIGUSR1) && !sigismember(&was, SIGUSR2), "%s: starts blocked", who);
  int p[2];
  CHECK_EQ(pipe(p), 0);
  if (kind == PPOLL0_READY || kind == PPOLL_T_READY) CHECK_EQ(write(p[1], "x", 1), 1);
  CHECK_EQ(raise(SIGUSR1), 0);
  CHECK_EQ(raise(SIGUSR2), 0);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &open), 0);
  sigdelset(&open, SIGUSR1);
  sigdelset(&open, SIGUSR2);
  nran = 0;
  struct timespec zero = {0, 0}, ten = {10, 0};
  struct pollfd pf = {p[0], POLLIN, 0};
  int ep = -1;
  long r;
  errno = 0;
  switch (kind) {
    case PPOLL0:
    case PPOLL0_READY:
      r = ppoll(&pf, 1, &zero, &open);
      break;
    case PPOLL_T:
    case PPOLL_T_READY:
      r = ppoll(&pf, 1, &ten, &open);
      break;
    case PSELECT0: {
      fd_set s;
      FD_ZERO(&s);
      FD_SET(p[0], &s);
      r = pselect(p[0] + 1, &s, NULL, NULL, &zero, &open);
      break;
    }
    case SIGSUSPEND:
      r = sigsuspend(&open);
      break;
    default: {
      ep = epoll_create1(0);
      CHECK(ep >= 0, "epoll_create1");
      struct epoll_event ev = {EPOLLIN, {0}};
      CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev), 0);
      r = epoll_pwait(ep, &ev, 1, kind == EPOLL_T ? 10000 : 0, &open);
      break;
    }
  }
  int err = errno, ran = nran;
  CHECK_EQ(sigpending(&pend), 0);
  int p1 = sigismember(&pend, SIGUSR1), p2 = sigismember(&pend, SIGUSR2);
  if (kind == PPOLL0_READY || kind == PPOLL_T_READY || kind == EPOLL0) {
    long want = kind == EPOLL0 ? 0 : 1;
    CHECK(r == want && ran == 0 && p1 && p2,
          "%s, %s: returned %ld (errno %d), %d handlers ran, SIGUSR1 %s, SIGUSR2 %s; expected %ld, "
          "none, both pending", who, names[kind], r, err, ran, p1 ? "pending" : "not pending",
          p2 ? "pending" : "not pending", want);
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, &was, NULL), 0);  /* now they run */
    CHECK(nran == 2, "%s, %s: %d handlers ran at the unblock, expected 2", who, names[kind], nran);
  } else {
    CHECK(r == -1 && err == EINTR && ran == 2 && !p1 && !p2,
          "%s, %s: returned %ld (errno %d), %d handlers ran (%d, %d), SIGUSR1 %s, SIGUSR2 %s; "
          "expected -1/EINTR after both handlers", who, names[kind], r, err, ran,
          ran > 0 ? order[0] : 0, ran > 1 ? order[1] : 0, p1 ? "pending" : "not pending",
          p2 ? "pending" : "not pending");
    CHECK((order[0] == SIGUSR1 && order[1] == SIGUSR2) || (order[0] == SIGUSR2 && order[1] == SIGUSR1),
          "%s, %s: handlers ran for %d and %d", who, names[kind], order[0], order[1]);
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, &was, NULL), 0);
    /* (Not the order: a goroutine's handlers run in goshim's order, lowest
     * first; LD_PRELOAD.md 7.19.) */
    printf("%s, %s: EINTR after both handlers\n", who, names[kind]);
  }
  if (ep >= 0) close(ep);
  close(p[0]);
  close(p[1]);
}

static void all(const char *who) {
  for (int k = 0; k < NKINDS; k++) one(who, k);
}

static void *second(void *arg) {
  all("second thread");
  return arg;
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sig;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
  all("main thread");
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, second, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  return 0;
}
