// Runtime start-up and the kernel threads (Ms) that run goroutines.
#pragma once

#include "core/gmp.hpp"

namespace goshim {

// On the initial thread, from __libc_start_main, before main: sets up the
// Ps, M0 (this kernel thread, scheduling on its own g0 block) and G1 (main,
// keeping the initial TLS block and stack). Returns false when goshim runs
// in pass-through mode (1:1 requested, or the TLS recipe refused), after a
// one-line warning in the latter case.
bool runtime_init();

// True once runtime_init succeeded (goroutines in use).
inline bool mn_active() { return runtime_up.load(std::memory_order_relaxed); }

// True once runtime_init returned false: the process runs 1:1 for good.
extern std::atomic<bool> runtime_refused;
inline bool one_to_one_mode() { return runtime_refused.load(std::memory_order_relaxed); }

// The initial process signal mask (what new Ms start with).
extern uint64_t initial_sigmask;

// All Ms (for sysmon and dumps). Locks: sched.allmlock for the list.
M* allm_head();

}  // namespace goshim
