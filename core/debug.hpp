// What GOSHIM_DEBUG asks for, run from sysmon:
//   schedtrace=MS   one line every MS ms (and scheddetail=1: every P, M, G)
//   deadlock=0      turns off the deadlock report (on by default)
//   pinned=MS       reports goroutines that blocked their M for MS ms in
//                   something goshim does not see
//   stats=1         a summary at exit (also in 1:1 mode)
// and the goroutine dump requested by the dump signal (SIGQUIT).
#pragma once

#include <stdint.h>

#include "core/gmp.hpp"

namespace goshim {

// Registers the sysmon hooks (runtime init).
void debug_init();

// One schedtrace line (and the detail) to fd, as of now.
void schedtrace_print(int fd, bool detail);

// The exit summary; mn: whether goroutines were in use. Also called in 1:1
// mode (the counters then come from pass-through pthread_create).
void stats_print(bool mn);

// The pass-through (1:1) mode counts its thread creations.
void stats_thread_created();

// The deadlock report's first question (sysmon): every goroutine parked on
// in-process synchronization and no M doing anything. Any thread.
bool all_asleep();

}  // namespace goshim
