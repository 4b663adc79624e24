// What sysmon needs to know of the allocator's locks (core/jemalloc_glue.cpp).
#pragma once

#include "core/gmp.hpp"

namespace goshim {

// The goroutine holding the allocator lock `mutex` (an M's alloc_lock_wait),
// or null: not held, or held by a g0, by a kernel thread goshim did not
// create or by a thread before the runtime existed (the lock word names
// its holder: there is no moment where a goroutine holds it unnamed). A G read here may have released the lock
// and moved on since (Gs are never unmapped): the caller looks again at its
// next tick. Any thread.
G* alloc_lock_holder(void* mutex);

}  // namespace goshim
