// Signals under M:N (DESIGN.md decision 11). This header is the contract
// the wait layers use; delivery to goroutines lives in signal.cpp.
#pragma once

#include <signal.h>

#include "core/gmp.hpp"

namespace goshim {

// Records the program's disposition for sig (sigaction/signal). Any thread.
void signal_record_action(int sig, const struct sigaction* act);
// The flags of the program's handler for sig (0 for SIG_DFL/SIG_IGN).
int signal_flags(int sig);

// After an interruptible wait of gp returned EINTR (interrupt_wait): true
// if the call should be restarted, i.e. the signal that interrupted it has
// a handler installed with SA_RESTART. Consumes the interruption record.
bool signal_should_restart(G* gp);

// Records that signal sig interrupts gp's wait (before interrupt_wait).
void signal_note_interrupt(G* gp, int sig);

}  // namespace goshim
