// Asynchronous preemption (DESIGN.md decision 8).
//
// sysmon asks for a G that has run for 10 ms to be preempted: it sets
// G::preempt and sends the preemption signal (SIGURG unless GOSHIM_PREEMPT
// says otherwise) to the M running it, tagged so that goshim can tell its
// own signal from the program's. The handler switches the G away only at a
// safe point: the interrupted PC is outside libc, ld.so, libstdc++,
// libgcc_s, the vDSO and libgoshim (which holds jemalloc), the G is not
// inside a program signal handler, and the G is the M's current G. There,
// the kernel has already saved the full register state (general registers
// and the xsave area with every vector register) in the signal frame. The
// signal is SA_ONSTACK: the frame is on the G's own sigaltstack if it has
// one, else on the M's signal stack (M::sigstk), from which the handler
// first moves it onto the G's stack below the interrupted stack pointer,
// when there is room above the guard (signal.cpp, "The M's signal stack";
// with no room the G is not switched: it yields at its next interposed
// call). The handler parks the G on the global queue from inside the
// frame, and when the G runs again (on any M) the handler returns and
// rt_sigreturn restores everything. Elsewhere G::preempt stays set and the
// G yields at its next interposed call made from the program's own code.
//
// A program that installs its own handler for the preemption signal keeps
// getting its own signals: goshim's handler (signal.cpp) runs it for every
// signal that goshim did not send itself (tagged SI_QUEUE values).
#pragma once

#include <signal.h>

#include "core/gmp.hpp"

namespace goshim {

// Reads which code is unsafe to preempt (runtime init). The handler itself
// is installed by signal_init.
void preempt_init();
// Re-reads which code is unsafe to preempt (after dlopen).
void preempt_refresh_ranges();

// sysmon: asks the G running on pp to yield. Without P.
void preemptone(P* pp);

// Called by the signal handler (signal.cpp) for the preemption signal:
// handles goshim's own requests (preemption, delivery kicks, asynchronous
// cancellation) and returns true; false for a signal of the program.
// stuck: the frame lies on the M's own signal stack (signal.cpp, "The M's
// signal stack"): nothing that may switch, park or unwind is done there.
bool preempt_on_signal(siginfo_t* si, void* uctx, bool stuck);
// For a delivery of the preemption signal whose frame lies on the M's own
// signal stack: whether it is goshim's, and whether its handler must move
// the frame to the G's stack first (it will switch the G out: only on the
// G's own stack; deliver the G's pending signals or unwind it: wherever
// the G runs). Signal context, on gp's M.
enum class PreemptMove : uint8_t { NotOurs, Stay, Move, MoveOwnStack };
PreemptMove preempt_move_wanted(siginfo_t* si, void* uctx, G* gp);
// Asks target's M, through the preemption signal, to deliver target's
// pending signals (cancel: to act on its asynchronous cancellation).
void preempt_kick(G* target, bool cancel);
// Asks target's M to record target's backtrace for a dump (dump.hpp).
void preempt_dump_kick(G* target);

// On user G, at an interposed call made from caller_pc: yields if a
// preemption is pending and the caller is the program's own code.
void preempt_at_call(G* gp, const void* caller_pc);

// In a fork child (fork.hpp).
void preempt_after_fork();

// Whether pc lies in code that must not be preempted.
bool pc_unsafe(uintptr_t pc);

// Signal context, on gp's M, gp interrupted at uctx with an asynchronous
// cancellation pending: whether glibc's unwinding may start there. Only
// when no goshim frame lies between the interrupted pc and the program's
// own code (the pc is in the program, or in libc/the vDSO called by the
// program, not by goshim: goshim's runtime calls the vDSO and libc's
// string functions with runtime locks held, e.g. park's clock read under
// a sema bucket lock), the G is not in a program signal handler and its
// M holds no runtime Mutex. When not, it sets G::preempt so that gp acts
// on the cancellation at its next interposed call (preempt_at_call).
bool async_cancel_safe(G* gp, void* uctx);

// Signal context (the SIGCANCEL handler), on gp's M: gp runs a program
// signal handler (G::insig > 0) and was interrupted at uctx inside one of
// glibc's cancellable system calls with its cancellation pending. Whether
// glibc's unwinding may start there: the M holds no runtime Mutex and no
// goshim frame lies between the interrupted pc and the program's code that
// made the call (the handler's poll: the shim passed it on to libc with a
// tail call). The unwinding then leaves the handler as a cancellation
// point the handler calls does (cancel_point from a handler).
bool handler_cancel_safe(G* gp, void* uctx);

}  // namespace goshim
