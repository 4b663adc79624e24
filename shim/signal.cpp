// Signal dispositions: sigaction (__sigaction), signal (bsd_signal,
// ssignal), sysv_signal (__sysv_signal: signal() in a strict ISO C or POSIX
// build), siginterrupt, sigset, sigignore, and the compat sigvec. The
// program's dispositions are kept by core/signal,
// which installs goshim's routing handler in the kernel where needed (every
// handled signal, the preemption signal); sigaction reports the program's
// own disposition back.
//
// glibc implements signal() and friends with internal calls to sigaction
// that an interposer would not see, hence one entry point each (every
// public entry point of glibc 2.36 that sets a disposition; the ones that
// change a mask are in signal_thread.cpp). Each follows glibc's own
// version (sysdeps/posix/*.c) on top of goshim's sigaction/sigprocmask.
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "core/real.hpp"
#include "core/signal.hpp"
#include "shim/shim.hpp"

using namespace goshim;

namespace {

// Signals whose handlers must not restart calls (siginterrupt(sig, 1)).
std::atomic<uint64_t> interrupt_set{0};

bool valid(int sig) { return sig >= 1 && sig <= 64; }

int do_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (!valid(sig) || (act && (sig == SIGKILL || sig == SIGSTOP))) {
    errno = EINVAL;
    return -1;
  }
  if (mn_active()) {
    int r = signal_action(sig, act, old);
    if (r < 0) {
      errno = -r;
      return -1;
    }
    return 0;
  }
  int r = real::lazy::sigaction()(sig, act, old);
  if (r == 0 && act) signal_record_action(sig, act);
  return r;
}

sighandler_t install(int sig, sighandler_t handler, int flags, bool mask_self) {
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  if (mask_self && valid(sig)) sigaddset(&act.sa_mask, sig);
  act.sa_flags = flags;
  if (do_sigaction(sig, &act, &old) < 0) return SIG_ERR;
  return old.sa_handler;
}

}  // namespace

GOSHIM_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return do_sigaction(sig, act, old);
}

GOSHIM_EXPORT int __sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return do_sigaction(sig, act, old);
}

// BSD semantics, as glibc's signal(): SA_RESTART unless siginterrupt(sig, 1).
// signal, bsd_signal and ssignal are one function in glibc.
GOSHIM_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  if (handler == SIG_ERR || !valid(sig) || sig == 32 || sig == 33) {
    errno = EINVAL;
    return SIG_ERR;
  }
  bool intr = interrupt_set.load(std::memory_order_relaxed) & (1ull << (sig - 1));
  return install(sig, handler, intr ? 0 : SA_RESTART, true);
}

GOSHIM_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) { return signal(sig, handler); }

GOSHIM_EXPORT sighandler_t ssignal(int sig, sighandler_t handler) { return signal(sig, handler); }

// System V semantics: one-shot, not blocked during its own handler, no
// restart. <signal.h> redirects signal() here in a strict ISO C / POSIX
// build (no _DEFAULT_SOURCE), e.g. gcc -std=c99.
GOSHIM_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) {
  if (handler == SIG_ERR || !valid(sig)) {
    errno = EINVAL;
    return SIG_ERR;
  }
  return install(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}

GOSHIM_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler) { return sysv_signal(sig, handler); }

// XSI: SIG_IGN, empty mask, no flags.
GOSHIM_EXPORT int sigignore(int sig) {
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = SIG_IGN;
  sigemptyset(&act.sa_mask);
  return do_sigaction(sig, &act, nullptr);
}

// The 4.2BSD sigvec, a compat symbol (sigvec@GLIBC_2.2.5) that old binaries
// still reach: sv_mask is an old-style mask of signals 1..32.
namespace {
struct old_sigvec {
  sighandler_t sv_handler;
  int sv_mask;
  int sv_flags;
};
constexpr int kSvOnstack = 1, kSvInterrupt = 2, kSvResethand = 4;
}  // namespace

GOSHIM_EXPORT int sigvec(int sig, const struct old_sigvec* vec, struct old_sigvec* ovec) {
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  memset(&old, 0, sizeof old);
  if (vec) {
    act.sa_handler = vec->sv_handler;
    uint64_t m = (unsigned int)vec->sv_mask;
    memcpy(&act.sa_mask, &m, sizeof m);
    if (vec->sv_flags & kSvOnstack) act.sa_flags |= SA_ONSTACK;
    if (!(vec->sv_flags & kSvInterrupt)) act.sa_flags |= SA_RESTART;
    if (vec->sv_flags & kSvResethand) act.sa_flags |= SA_RESETHAND;
  }
  if (do_sigaction(sig, vec ? &act : nullptr, &old) < 0) return -1;
  if (ovec) {
    int f = 0;
    if (old.sa_flags & SA_RESETHAND) f |= kSvResethand;
    if (old.sa_flags & SA_ONSTACK) f |= kSvOnstack;
    if (!(old.sa_flags & SA_RESTART)) f |= kSvInterrupt;
    uint64_t m;
    memcpy(&m, &old.sa_mask, sizeof m);
    ovec->sv_handler = old.sa_handler;
    ovec->sv_mask = (int)(unsigned int)m;
    ovec->sv_flags = f;
  }
  return 0;
}

GOSHIM_EXPORT int siginterrupt(int sig, int flag) {
  if (!valid(sig)) {
    errno = EINVAL;
    return -1;
  }
  struct sigaction act;
  if (do_sigaction(sig, nullptr, &act) < 0) return -1;
  uint64_t bit = 1ull << (sig - 1);
  if (flag) {
    interrupt_set.fetch_or(bit);
    act.sa_flags &= ~SA_RESTART;
  } else {
    interrupt_set.fetch_and(~bit);
    act.sa_flags |= SA_RESTART;
  }
  return do_sigaction(sig, &act, nullptr);
}

// SVID sigset, in glibc's order: SIG_HOLD blocks the signal and returns
// SIG_HOLD if it was blocked already, else its disposition; any other
// handler is installed (empty mask, no flags), the signal unblocked, and
// the previous disposition returned (SIG_HOLD if it was blocked).
GOSHIM_EXPORT sighandler_t sigset(int sig, sighandler_t handler) {
  sigset_t s, olds;
  sigemptyset(&s);
  if (sigaddset(&s, sig) < 0) return SIG_ERR;  // EINVAL, also for 32 and 33
  if (handler == SIG_HOLD) {
    if (sigprocmask(SIG_BLOCK, &s, &olds) < 0) return SIG_ERR;
    if (sigismember(&olds, sig)) return SIG_HOLD;
    struct sigaction old;
    if (do_sigaction(sig, nullptr, &old) < 0) return SIG_ERR;
    return old.sa_handler;
  }
  sighandler_t prev = install(sig, handler, 0, false);
  if (prev == SIG_ERR) return SIG_ERR;
  if (sigprocmask(SIG_UNBLOCK, &s, &olds) < 0) return SIG_ERR;
  return sigismember(&olds, sig) ? SIG_HOLD : prev;
}
