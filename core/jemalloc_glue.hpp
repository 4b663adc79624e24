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

}  // namespace goshim
