// Per-goroutine CPU time: what CLOCK_THREAD_CPUTIME_ID, the clock of
// pthread_getcpuclockid and getrusage(RUSAGE_THREAD) report for a G.
//
// A G's time is the sum, over the intervals it ran on an M, of the M's
// thread CPU clock advance (a blocking call keeps the G on its M, so the
// kernel's time in it counts, as natively). Reading a thread CPU clock is a
// system call (about 1 µs here), so the accounting starts only when the
// program first asks for a thread CPU clock (cputime_enable); CPU time a G
// used before that is not counted. Until then each switch costs one load.
#pragma once

#include <stdint.h>

#include <atomic>

#include "core/gmp.hpp"

namespace goshim {

extern std::atomic<bool> cputime_on;

void cputime_in_slow(G* gp);
void cputime_out_slow(G* gp);

// gp starts running on the calling kernel thread (its M). On that M, any stack.
inline void cputime_in(G* gp) {
  if (__builtin_expect(cputime_on.load(std::memory_order_relaxed), 0)) cputime_in_slow(gp);
}
// gp stops running on the calling kernel thread.
inline void cputime_out(G* gp) {
  if (__builtin_expect(cputime_on.load(std::memory_order_relaxed), 0)) cputime_out_slow(gp);
}
// Starts the accounting (idempotent); self, if not null, is the calling G,
// running: its time counts from now. On user G or any thread.
void cputime_enable(G* self);

// The CPU time gp has used, in ns, or -1 if gp is gone. self is the calling
// G (or null). Any thread.
int64_t g_cputime(G* gp, G* self);

// A new G (thread_create) or the forking G in the child (the child's thread
// starts with no CPU time, as natively).
void cputime_reset(G* gp, bool running);

}  // namespace goshim
