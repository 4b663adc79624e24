// What sysmon needs to know of the allocator's locks (core/jemalloc_glue.cpp).
#pragma once

#include "core/gmp.hpp"

namespace goshim {

// Who holds the allocator lock `mutex` (an M's alloc_lock_wait), as its
// holder recorded it:
//   - a goroutine (a G read here may have released the lock and moved on
//     since: Gs are never unmapped; the caller looks again at its next
//     tick);
//   - alloc_holder_thread(): a g0, a kernel thread goshim did not create, or
//     any thread before the runtime started (none of them parks in there);
//   - null: nobody recorded: not held, or held by a goroutine between
//     taking the lock word and recording itself, or between clearing its
//     record and releasing the word. A program signal handler may run on
//     it there and block (tests/preload/malloc_signal_park), so null means
//     "unknown", never "a kernel thread".
// Any thread.
inline G* alloc_holder_thread() { return reinterpret_cast<G*>(uintptr_t{1}); }
G* alloc_lock_holder(void* mutex);

// Whether the P of `waiter`, an M asleep on an allocator lock held by h
// (alloc_lock_holder), stays with it (sysmon's check_m; state(m) is m's
// kernel thread's state letter, 'R' when the kernel can run it).
// While the holder runs on a kernel thread the wait ends without any
// goroutine's help, and a spare M would most often block behind the same
// lock (on an overloaded machine, where the holder waits for a CPU, that
// gave one more kernel thread per look: tests/preload/alloc_contention):
// kept for a g0 or foreign holder (they never park in there) and for a
// goroutine Running on another M whose thread the kernel can run. The P
// moves for anything else: a holder parked, waiting for a P, in a
// blocking call or asleep in the kernel (a program signal handler that
// interrupted the allocator and waits for another goroutine, which needs
// a P), or not recorded (the handler interrupted a goroutine between the
// lock word and the record: every P stayed with an M asleep on that lock
// and malloc_signal_park hung 1 run in about 50 at the default
// configuration). Exposed for tests. Any thread.
bool alloc_wait_keeps_p(G* h, M* waiter, char (*state)(M*));

}  // namespace goshim
