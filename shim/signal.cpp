// Signal dispositions: sigaction, signal, bsd_signal, sysv_signal,
// siginterrupt, sigset. The program's dispositions are kept by core/signal,
// which installs goshim's routing handler in the kernel where needed (every
// handled signal, the preemption signal); sigaction reports the program's
// own disposition back.
//
// glibc implements signal() and friends with internal calls to sigaction
// that an interposer would not see, hence one entry point each.
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "core/signal.hpp"
#include "shim/shim.hpp"

using namespace goshim;

namespace {

using sigaction_fn = int (*)(int, const struct sigaction*, struct sigaction*);

sigaction_fn real_sigaction() {
  static sigaction_fn f;
  if (!f) f = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
  return f;
}

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
  int r = real_sigaction()(sig, act, old);
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

// BSD semantics, as glibc's signal(): SA_RESTART unless siginterrupt(sig, 1).
GOSHIM_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  if (!valid(sig)) {
    errno = EINVAL;
    return SIG_ERR;
  }
  bool intr = interrupt_set.load(std::memory_order_relaxed) & (1ull << (sig - 1));
  return install(sig, handler, intr ? 0 : SA_RESTART, true);
}

GOSHIM_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) { return signal(sig, handler); }

// System V semantics: one-shot, not blocked during its own handler.
GOSHIM_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) {
  if (!valid(sig)) {
    errno = EINVAL;
    return SIG_ERR;
  }
  return install(sig, handler, SA_RESETHAND | SA_NODEFER, false);
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

// SVID sigset: SIG_HOLD blocks the signal, anything else installs the
// handler and unblocks it; returns the previous disposition (SIG_HOLD if it
// was blocked).
GOSHIM_EXPORT sighandler_t sigset(int sig, sighandler_t handler) {
  if (!valid(sig)) {
    errno = EINVAL;
    return SIG_ERR;
  }
  sigset_t s, olds;
  sigemptyset(&s);
  sigaddset(&s, sig);
  if (handler == SIG_HOLD) {
    struct sigaction old;
    if (do_sigaction(sig, nullptr, &old) < 0) return SIG_ERR;
    if (sigprocmask(SIG_BLOCK, &s, &olds) < 0) return SIG_ERR;
    return sigismember(&olds, sig) ? SIG_HOLD : old.sa_handler;
  }
  sighandler_t prev = install(sig, handler, 0, false);
  if (prev == SIG_ERR) return SIG_ERR;
  if (sigprocmask(SIG_UNBLOCK, &s, &olds) < 0) return SIG_ERR;
  return sigismember(&olds, sig) ? SIG_HOLD : prev;
}
