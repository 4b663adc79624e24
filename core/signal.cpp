// Signals under M:N: recorded dispositions and restart decisions.
#include "core/signal.hpp"

#include <atomic>

namespace goshim {

namespace {
// SA_* flags of the program's handlers, and whether a handler (not
// SIG_DFL/SIG_IGN) is installed. Written by sigaction, read lock-free.
std::atomic<int> sig_flags[65];
std::atomic<bool> sig_handled[65];
}  // namespace

void signal_record_action(int sig, const struct sigaction* act) {
  if (sig <= 0 || sig > 64 || !act) return;
  bool handled = act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
  sig_flags[sig].store(act->sa_flags, std::memory_order_relaxed);
  sig_handled[sig].store(handled, std::memory_order_release);
}

int signal_flags(int sig) {
  if (sig <= 0 || sig > 64) return 0;
  return sig_handled[sig].load(std::memory_order_acquire)
             ? sig_flags[sig].load(std::memory_order_relaxed)
             : 0;
}

void signal_note_interrupt(G* gp, int sig) { gp->intr_signal.store(sig, std::memory_order_release); }

bool signal_should_restart(G* gp) {
  int sig = gp->intr_signal.exchange(0, std::memory_order_acq_rel);
  return sig > 0 && (signal_flags(sig) & SA_RESTART);
}

}  // namespace goshim
