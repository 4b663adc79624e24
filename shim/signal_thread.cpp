// The per-thread side of signals: masks, sending to a thread, pending
// sets, alternate stacks, waiting for signals, and pthread_cancel. For a
// goroutine each acts on the G (core/signal); on a foreign thread, before
// init and in 1:1 mode, glibc's own functions do.
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "core/proc.hpp"
#include "core/sema.hpp"
#include "core/signal.hpp"
#include "shim/shim.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

bool ours(pthread_t t) { return mn_active() && is_goshim_tp(t); }

uint64_t bits(const sigset_t* s) {
  uint64_t v;
  memcpy(&v, s, sizeof v);
  return v;
}

// As glibc's sigtimedwait: the kernel's SI_TKILL (tkill, tgkill: raise,
// pthread_kill) is reported as SI_USER.
int fold_tkill(int sig, siginfo_t* info) {
  if (sig > 0 && info && info->si_code == SI_TKILL) info->si_code = SI_USER;
  return sig;
}

// sigwait family on a goroutine: take a pending signal of set, else park
// until one is routed here, a handler runs (EINTR for the info variants)
// or the deadline passes. Returns the signal, or -errno.
int wait_for(G* gp, uint64_t set, siginfo_t* info, int64_t deadline, bool eintr) {
  set &= ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)));
  for (;;) {
    cancel_point();
    int sig = signal_take(gp, set, info);
    if (sig) return fold_tkill(sig, info);
    uint32_t handled = gp->nhandled;
    signal_waiting(gp, set);
    int r = sema_wait(&gp->sigwait_word, 0, deadline, WaitReason::SigWait);
    signal_waiting(gp, 0);
    sig = signal_take(gp, set, info);
    if (sig) return fold_tkill(sig, info);
    if (r == ETIMEDOUT) return -EAGAIN;
    if (eintr && gp->nhandled != handled) return -EINTR;
  }
}

// sigsuspend on a goroutine: mask replaced by mask until a handler runs.
int suspend(G* gp, uint64_t mask) {
  sigset_t m, old;
  sigemptyset(&m);
  memcpy(&m, &mask, sizeof mask);
  uint32_t handled = gp->nhandled;
  signal_setmask(gp, SIG_SETMASK, &m, &old);  // delivers what it unblocks
  while (gp->nhandled == handled) {
    cancel_point();
    signal_waiting(gp, ~gp->sigmask);
    sema_wait(&gp->sigwait_word, 0, 0, WaitReason::SigWait);
    signal_waiting(gp, 0);
  }
  signal_setmask(gp, SIG_SETMASK, &old, nullptr);
  errno = EINTR;
  return -1;
}

}  // namespace

// The goroutine whose own signal mask a mask call changes: M:N
// (shim::user_g) or bound to its kernel thread by a real-time policy
// (core/rtlock.hpp), outside a program signal handler.
static G* mask_g() {
  if (G* gp = shim::user_g()) return gp;
  G* g = tls_g;
  return g && !g->is_g0() && g->rt_locked && g->insig == 0 && mn_active() ? g : nullptr;
}

GOSHIM_EXPORT int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  if (G* gp = mask_g()) return signal_setmask(gp, how, set, old);
  shim::ensure_real();
  return real::pthread_sigmask(how, set, old);
}

GOSHIM_EXPORT int sigprocmask(int how, const sigset_t* set, sigset_t* old) {
  if (G* gp = mask_g()) {
    int r = signal_setmask(gp, how, set, old);
    if (r) {
      errno = r;
      return -1;
    }
    return 0;
  }
  shim::ensure_real();
  return real::sigprocmask(how, set, old);
}

GOSHIM_EXPORT int pthread_kill(pthread_t t, int sig) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_kill(t, sig);
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  return signal_send(gp, sig, nullptr);
}

GOSHIM_EXPORT int pthread_sigqueue(pthread_t t, int sig, const union sigval value) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_sigqueue(t, sig, value);
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  return signal_send(gp, sig, sig ? &value : nullptr);
}

GOSHIM_EXPORT int raise(int sig) {
  if (G* gp = shim::user_g()) {
    int r = signal_send(gp, sig, nullptr);
    if (r) {
      errno = r;
      return -1;
    }
    return 0;
  }
  shim::ensure_real();
  return real::raise(sig);
}

GOSHIM_EXPORT int sigpending(sigset_t* set) {
  if (G* gp = shim::user_g()) {
    signal_pending_set(gp, set);
    return 0;
  }
  shim::ensure_real();
  return real::sigpending(set);
}

GOSHIM_EXPORT int sigaltstack(const stack_t* ss, stack_t* old) {
  if (G* gp = shim::user_g()) {
    int r = signal_altstack(gp, ss, old);
    if (r) {
      errno = r;
      return -1;
    }
    return 0;
  }
  shim::ensure_real();
  return real::sigaltstack(ss, old);
}

GOSHIM_EXPORT int sigwait(const sigset_t* set, int* sig) {
  if (G* gp = shim::user_g()) {
    int r = wait_for(gp, bits(set), nullptr, 0, false);
    if (r < 0) return -r;
    *sig = r;
    return 0;
  }
  shim::ensure_real();
  return real::sigwait(set, sig);
}

GOSHIM_EXPORT int sigwaitinfo(const sigset_t* set, siginfo_t* info) {
  if (G* gp = shim::user_g()) {
    siginfo_t tmp;
    int r = wait_for(gp, bits(set), info ? info : &tmp, 0, true);
    if (r < 0) {
      errno = -r;
      return -1;
    }
    return r;
  }
  shim::ensure_real();
  return real::sigwaitinfo(set, info);
}

GOSHIM_EXPORT int sigtimedwait(const sigset_t* set, siginfo_t* info, const struct timespec* ts) {
  if (G* gp = shim::user_g()) {
    int64_t deadline = 0;
    if (ts) {
      if (ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000 || ts->tv_sec < 0) {
        errno = EINVAL;
        return -1;
      }
      deadline = sys::nanotime() + (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
    }
    siginfo_t tmp;
    int r = wait_for(gp, bits(set), info ? info : &tmp, deadline, true);
    if (r < 0) {
      errno = -r;
      return -1;
    }
    return r;
  }
  shim::ensure_real();
  return real::sigtimedwait(set, info, ts);
}

GOSHIM_EXPORT int sigsuspend(const sigset_t* mask) {
  if (G* gp = shim::user_g()) return suspend(gp, bits(mask));
  shim::ensure_real();
  return real::sigsuspend(mask);
}

GOSHIM_EXPORT int pause(void) {
  if (G* gp = shim::user_g()) return suspend(gp, gp->sigmask);
  shim::ensure_real();
  return real::pause();
}

GOSHIM_EXPORT int pthread_cancel(pthread_t t) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_cancel(t);
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  return cancel_send(gp);
}
