/* The old and the XSI signal interfaces, built as a strict POSIX program
 * (no _DEFAULT_SOURCE: <signal.h> then turns signal() into __sysv_signal and
 * sigpause() into __xpg_sigpause), each of which changes the thread's mask
 * or a disposition:
 *   sighold, sigrelse, sigignore, sigset, sigpause (X/Open and BSD),
 *   signal (System V in this build), bsd_signal, ssignal, gsignal,
 *   sigblock, sigsetmask, siggetmask, sigvec (compat), sigstack,
 *   __sigsuspend.
 * Every change must be seen by sigprocmask/sigaction/sigaltstack and by
 * signal delivery exactly as natively: a signal held with sighold and
 * raised is pending for sigwaitinfo (its handler does not run); a handler
 * installed through any of them is the one sigaction reports; sigpause
 * returns once the pending signal's handler has run. */
#undef _GNU_SOURCE
#undef _DEFAULT_SOURCE
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* Not declared in a strict build (BSD and SVID interfaces). */
extern int sigblock(int mask);
extern int sigsetmask(int mask);
extern int siggetmask(void);
extern void (*ssignal(int sig, void (*h)(int)))(int);
extern int gsignal(int sig);
extern void (*bsd_signal(int sig, void (*h)(int)))(int);
extern int __sigpause(int sig_or_mask, int is_sig);
extern int __sigsuspend(const sigset_t *set);
extern int bsd_sigpause(int mask) __asm__("sigpause");
struct old_sigstack {
  void *ss_sp;
  int ss_onstack;
};
extern int sigstack(struct old_sigstack *ss, struct old_sigstack *oss);
/* 4.2BSD sigvec: only a compat symbol in glibc, as old binaries use it. */
struct old_sigvec {
  void (*sv_handler)(int);
  int sv_mask;
  int sv_flags;
};
#define SV_ONSTACK 1
#define SV_INTERRUPT 2
#define SV_RESETHAND 4
/* (x86-64 only: glibc ports newer than it, aarch64's among them, never
 * had the symbol.) */
#if defined(__x86_64__)
#define HAVE_SIGVEC 1
extern int compat_sigvec(int sig, const struct old_sigvec *v, struct old_sigvec *ov);
__asm__(".symver compat_sigvec,sigvec@GLIBC_2.2.5");
#endif

#define OLDMASK(sig) (1 << ((sig) - 1))

static volatile sig_atomic_t hits[65];
static void on_sig(int sig) { hits[sig]++; }
static void on_sig2(int sig) { hits[sig] += 100; }

static void install(int sig, void (*h)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = h;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(sig, &sa, NULL), 0);
}

static void (*handler_of(int sig))(int) {
  struct sigaction sa;
  CHECK_EQ(sigaction(sig, NULL, &sa), 0);
  return sa.sa_handler;
}

static long flags_of(int sig) {
  struct sigaction sa;
  CHECK_EQ(sigaction(sig, NULL, &sa), 0);
  return (unsigned)sa.sa_flags & (unsigned)(SA_RESETHAND | SA_NODEFER | SA_RESTART | SA_SIGINFO | SA_ONSTACK);
}

static int blocked(int sig) {
  sigset_t cur;
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &cur), 0);
  return sigismember(&cur, sig);
}

static int pending(int sig) {
  sigset_t p;
  CHECK_EQ(sigpending(&p), 0);
  return sigismember(&p, sig);
}

static void test_sighold_sigwaitinfo(void) {
  int rt = SIGRTMIN;
  install(rt, on_sig);
  CHECK_EQ(sighold(rt), 0);
  CHECK(blocked(rt), "sighold did not block SIGRTMIN");
  /* Several instances: all queue, none runs the handler. */
  for (int i = 0; i < 3; i++) CHECK_EQ(raise(rt), 0);
  CHECK_EQ(hits[rt], 0);
  CHECK(pending(rt), "SIGRTMIN not pending");
  sigset_t w;
  sigemptyset(&w);
  sigaddset(&w, rt);
  for (int i = 0; i < 3; i++) {
    siginfo_t si;
    struct timespec ts = {5, 0};
    CHECK_EQ(sigtimedwait(&w, &si, &ts), rt);
    CHECK_EQ(si.si_signo, rt);
    CHECK_EQ(si.si_code, SI_USER);
    CHECK_EQ(si.si_pid, getpid());
  }
  CHECK(!pending(rt), "SIGRTMIN still pending");
  CHECK_EQ(hits[rt], 0);
  /* sigrelse: a held instance runs its handler before sigrelse returns. */
  CHECK_EQ(raise(rt), 0);
  CHECK_EQ(hits[rt], 0);
  CHECK_EQ(sigrelse(rt), 0);
  CHECK_EQ(hits[rt], 1);
  CHECK(!blocked(rt), "sigrelse did not unblock");
  /* glibc's sigaddset rules. */
  errno = 0;
  CHECK_EQ(sighold(0), -1);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK_EQ(sigrelse(65), -1);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK_EQ(sighold(32), -1);
  CHECK_EQ(errno, EINVAL);
  printf("sighold/sigrelse: ok\n");
}

static void test_sigignore(void) {
  install(SIGUSR2, on_sig);
  CHECK_EQ(sigignore(SIGUSR2), 0);
  CHECK(handler_of(SIGUSR2) == SIG_IGN, "sigignore not reported by sigaction");
  CHECK_EQ(raise(SIGUSR2), 0);
  CHECK_EQ(hits[SIGUSR2], 0);
  errno = 0;
  CHECK_EQ(sigignore(SIGKILL), -1);
  CHECK_EQ(errno, EINVAL);
  printf("sigignore: ok\n");
}

static void test_sysv_signal(void) {
  /* A signal the thread blocked once (goshim keeps such signals under its
   * own handler in the kernel): signal() must still report SIG_DFL. */
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGALRM);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
  CHECK(signal(SIGALRM, on_sig) == SIG_DFL, "signal() did not return SIG_DFL");
  CHECK(handler_of(SIGALRM) == on_sig, "signal() handler not reported");
  /* System V: one-shot, not blocked in its handler, no restart. */
  CHECK_EQ(flags_of(SIGALRM), (unsigned)(SA_RESETHAND | SA_NODEFER));
  CHECK_EQ(raise(SIGALRM), 0);
  CHECK_EQ(hits[SIGALRM], 1);
  CHECK(handler_of(SIGALRM) == SIG_DFL, "one-shot handler not reset");
  CHECK(signal(SIGALRM, SIG_IGN) == SIG_DFL, "second signal() result");
  CHECK(signal(SIGALRM, SIG_DFL) == SIG_IGN, "third signal() result");
  errno = 0;
  CHECK(signal(SIGALRM, SIG_ERR) == SIG_ERR, "SIG_ERR accepted");
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK(signal(0, on_sig) == SIG_ERR, "signal 0 accepted");
  CHECK_EQ(errno, EINVAL);
  printf("signal (System V): ok\n");
}

static void test_bsd_signal_ssignal(void) {
  CHECK(ssignal(SIGUSR1, on_sig) == SIG_DFL, "ssignal result");
  CHECK(handler_of(SIGUSR1) == on_sig, "ssignal handler not reported");
  CHECK_EQ(flags_of(SIGUSR1), SA_RESTART);
  CHECK(bsd_signal(SIGUSR1, on_sig2) == on_sig, "bsd_signal result");
  CHECK(handler_of(SIGUSR1) == on_sig2, "bsd_signal handler not reported");
  /* gsignal is raise. */
  CHECK_EQ(gsignal(SIGUSR1), 0);
  CHECK_EQ(hits[SIGUSR1], 100);
  CHECK(ssignal(SIGUSR1, SIG_DFL) == on_sig2, "ssignal result 2");
  hits[SIGUSR1] = 0;
  printf("bsd_signal/ssignal/gsignal: ok\n");
}

static void test_old_masks(void) {
  install(SIGUSR1, on_sig);
  int m0 = siggetmask();
  CHECK(!(m0 & OLDMASK(SIGUSR1)), "SIGUSR1 blocked at start");
  CHECK_EQ(sigblock(OLDMASK(SIGUSR1) | OLDMASK(SIGHUP)), m0);
  CHECK(blocked(SIGUSR1) && blocked(SIGHUP), "sigblock not seen by pthread_sigmask");
  CHECK_EQ(siggetmask(), m0 | OLDMASK(SIGUSR1) | OLDMASK(SIGHUP));
  CHECK_EQ(gsignal(SIGUSR1), 0);
  CHECK_EQ(hits[SIGUSR1], 0);
  CHECK(pending(SIGUSR1), "SIGUSR1 not pending under sigblock");
  /* sigsetmask back to the old mask: delivered before it returns. */
  CHECK_EQ(sigsetmask(m0), m0 | OLDMASK(SIGUSR1) | OLDMASK(SIGHUP));
  CHECK_EQ(hits[SIGUSR1], 1);
  CHECK(!blocked(SIGUSR1) && !blocked(SIGHUP), "sigsetmask not seen by pthread_sigmask");
  /* A real-time signal is beyond the old 32-bit mask: sigsetmask clears it. */
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGRTMIN + 1);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  CHECK_EQ(sigsetmask(m0), m0);
  CHECK(!blocked(SIGRTMIN + 1), "sigsetmask kept a real-time signal blocked");
  hits[SIGUSR1] = 0;
  printf("sigblock/sigsetmask/siggetmask: ok\n");
}

static void test_sigpause(void) {
  install(SIGUSR1, on_sig);
  install(SIGUSR2, on_sig);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigaddset(&s, SIGUSR2);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  /* X/Open: sigpause(sig) opens sig only; the pending one runs. */
  CHECK_EQ(raise(SIGUSR1), 0);
  CHECK_EQ(hits[SIGUSR1], 0);
  errno = 0;
  CHECK_EQ(sigpause(SIGUSR1), -1);
  CHECK_EQ(errno, EINTR);
  CHECK_EQ(hits[SIGUSR1], 1);
  CHECK(blocked(SIGUSR1) && blocked(SIGUSR2), "sigpause did not restore the mask");
  /* The same through __sigpause(sig, 1). */
  CHECK_EQ(raise(SIGUSR2), 0);
  errno = 0;
  CHECK_EQ(__sigpause(SIGUSR2, 1), -1);
  CHECK_EQ(errno, EINTR);
  CHECK_EQ(hits[SIGUSR2], 1);
  /* BSD: the argument is the whole (old-style) mask during the wait. */
  CHECK_EQ(raise(SIGUSR1), 0);
  errno = 0;
  CHECK_EQ(bsd_sigpause(OLDMASK(SIGUSR2)), -1);
  CHECK_EQ(errno, EINTR);
  CHECK_EQ(hits[SIGUSR1], 2);
  CHECK(blocked(SIGUSR1) && blocked(SIGUSR2), "BSD sigpause did not restore the mask");
  /* __sigsuspend is sigsuspend. */
  CHECK_EQ(raise(SIGUSR2), 0);
  sigset_t none;
  sigemptyset(&none);
  errno = 0;
  CHECK_EQ(__sigsuspend(&none), -1);
  CHECK_EQ(errno, EINTR);
  CHECK_EQ(hits[SIGUSR2], 2);
  /* Invalid signal: sigdelset's EINVAL, nothing waits. */
  errno = 0;
  CHECK_EQ(sigpause(0), -1);
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
  hits[SIGUSR1] = hits[SIGUSR2] = 0;
  printf("sigpause: ok\n");
}

static void test_sigset(void) {
  install(SIGUSR1, on_sig);
  CHECK(sigset(SIGUSR1, SIG_HOLD) == on_sig, "sigset HOLD result");
  CHECK(blocked(SIGUSR1), "sigset HOLD did not block");
  CHECK(sigset(SIGUSR1, SIG_HOLD) == SIG_HOLD, "sigset HOLD twice");
  CHECK_EQ(raise(SIGUSR1), 0);
  CHECK_EQ(hits[SIGUSR1], 0);
  CHECK(sigset(SIGUSR1, on_sig2) == SIG_HOLD, "sigset from held");
  CHECK_EQ(hits[SIGUSR1], 100);
  CHECK(!blocked(SIGUSR1), "sigset did not unblock");
  CHECK(sigset(SIGUSR1, SIG_DFL) == on_sig2, "sigset result");
  errno = 0;
  CHECK(sigset(33, on_sig) == SIG_ERR, "sigset(33) accepted");
  CHECK_EQ(errno, EINVAL);
  hits[SIGUSR1] = 0;
  printf("sigset: ok\n");
}

static void test_sigvec(void) {
#ifndef HAVE_SIGVEC
  printf("sigvec: not in this architecture's glibc\n");
#else
  struct old_sigvec v = {on_sig, OLDMASK(SIGUSR2), SV_INTERRUPT | SV_RESETHAND}, ov;
  memset(&ov, 0, sizeof ov);
  CHECK_EQ(compat_sigvec(SIGHUP, &v, &ov), 0);
  CHECK(ov.sv_handler == SIG_DFL, "sigvec old handler");
  struct sigaction sa;
  CHECK_EQ(sigaction(SIGHUP, NULL, &sa), 0);
  CHECK(sa.sa_handler == on_sig, "sigvec handler not reported by sigaction");
  CHECK_EQ(flags_of(SIGHUP), (unsigned)SA_RESETHAND);
  CHECK(sigismember(&sa.sa_mask, SIGUSR2), "sigvec mask lost");
  CHECK_EQ(compat_sigvec(SIGHUP, NULL, &ov), 0);
  CHECK(ov.sv_handler == on_sig, "sigvec query handler");
  CHECK_EQ(ov.sv_mask & OLDMASK(SIGUSR2), OLDMASK(SIGUSR2));
  CHECK_EQ(ov.sv_flags, SV_INTERRUPT | SV_RESETHAND);
  CHECK_EQ(raise(SIGHUP), 0);
  CHECK_EQ(hits[SIGHUP], 1);
  CHECK(handler_of(SIGHUP) == SIG_DFL, "SV_RESETHAND not applied");
  hits[SIGHUP] = 0;
  printf("sigvec: ok\n");
#endif
}

static void test_sigstack(void) {
  /* sigstack's "stack" is everything below ss_sp: a low address keeps the
   * current stack pointer out of it (no signal is taken on it). */
  struct old_sigstack ss = {(void *)0x10000, 0}, oss = {(void *)1, 1};
  CHECK_EQ(sigstack(&ss, &oss), 0);
  CHECK(oss.ss_sp == NULL && oss.ss_onstack == 0, "sigstack old: %p %d", oss.ss_sp, oss.ss_onstack);
  stack_t cur;
  CHECK_EQ(sigaltstack(NULL, &cur), 0);
  CHECK(cur.ss_sp == ss.ss_sp, "sigstack not seen by sigaltstack");
  CHECK(cur.ss_size == (size_t)ss.ss_sp, "sigstack size");
  CHECK_EQ(cur.ss_flags, 0);
  CHECK_EQ(sigstack(NULL, &oss), 0);
  CHECK(oss.ss_sp == ss.ss_sp && oss.ss_onstack == 0, "sigstack query");
  stack_t off = {NULL, SS_DISABLE, 0};
  CHECK_EQ(sigaltstack(&off, NULL), 0);
  CHECK_EQ(sigstack(NULL, &oss), 0);
  CHECK(oss.ss_sp == NULL, "sigstack after disable");
  printf("sigstack: ok\n");
}

/* The same calls from a second thread: its mask is its own. */
static void *thread_side(void *arg) {
  int rt = SIGRTMIN + 2;
  install(rt, on_sig);
  CHECK_EQ(sighold(rt), 0);
  CHECK_EQ(pthread_kill(pthread_self(), rt), 0);
  CHECK_EQ(hits[rt], 0);
  sigset_t w;
  sigemptyset(&w);
  sigaddset(&w, rt);
  CHECK_EQ(sigwaitinfo(&w, NULL), rt);
  CHECK_EQ(hits[rt], 0);
  return NULL;
}

int main(void) {
  test_sighold_sigwaitinfo();
  test_sigignore();
  test_sysv_signal();
  test_bsd_signal_ssignal();
  test_old_masks();
  test_sigpause();
  test_sigset();
  test_sigvec();
  test_sigstack();
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, thread_side, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  CHECK(!blocked(SIGRTMIN + 2), "the thread's sighold leaked into main");
  printf("thread: ok\n");
  return 0;
}
