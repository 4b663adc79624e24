// What sysmon needs to know of the allocator's locks (core/jemalloc_glue.cpp).
#pragma once

#include <pthread.h>
#include <stdint.h>

#include "core/gmp.hpp"

namespace goshim {

// The goroutine holding the allocator lock `mutex` (an M's alloc_lock_wait),
// or null: not held, or held by a g0, by a kernel thread goshim did not
// create or by a thread before the runtime existed (the lock word names
// its holder: there is no moment where a goroutine holds it unnamed). A G read here may have released the lock
// and moved on since (Gs are never unmapped): the caller looks again at its
// next tick. Any thread.
G* alloc_lock_holder(void* mutex);

// A program signal handler is about to run on mp's kernel thread, which
// may be inside an allocator lock's wait (M::alloc_lock_wait set). The
// wait is suspended while the handler runs: mp's thread no longer sleeps
// on that lock (a handler that blocks in a system call holds the P in a
// sleep sysmon must judge as any other), and a wake-up the interrupted
// wait may have consumed (the releaser woke this thread, the signal came
// before it retook the lock) goes on to another waiter, which would sleep
// on a free lock otherwise until the handler returns. Returns the lock
// (or null) for alloc_wait_resume. Signal-safe.
void* alloc_wait_suspend(M* mp);
// A program signal handler is about to run on the calling thread, which
// may be inside an allocator lock's release, between the exchange that
// frees the word and the futex wake for its waiters
// (tls_je_unlocking): the wake is given now, not after a handler that may
// block, while the waiter sleeps on the free lock holding its P. Any
// thread; signal-safe.
void alloc_unlock_finish();
// The allocator lock the calling thread is releasing (goshim_je_mutex_unlock
// marks the release for alloc_unlock_finish), or null.
extern __thread pthread_mutex_t* tls_je_unlocking __attribute__((tls_model("initial-exec")));

// After the handler: the interrupted wait goes on (the kernel restarts
// its futex wait, or lock_slow loops). Signal-safe.
void alloc_wait_resume(M* mp, void* lock);

// How many of jemalloc's locks the calling thread holds (a goroutine's
// count is its own: goshim's __thread variables are per G, and a G holding
// one may go on on another M only after a signal handler parked it). Never
// below the locks held (a signal handler reads it too); above them only
// for a moment while a lock is being taken or released.
// While it is not 0 the thread is inside jemalloc, and an allocation it
// makes there (glibc's pthread_create callocs the DTV of the background
// thread jemalloc starts holding background_thread_lock) must not call
// mallctl, which may take a lock the thread holds (ctl_init ->
// background_thread_stats_read takes background_thread_lock): the process
// stopped for good at its start with MALLOC_CONF=background_thread:true
// (issue 12, tests/preload/malloc_bg_thread). core/mcache.cpp defers its
// mallctl calls until it is 0.
extern __thread uint32_t tls_je_locks_held __attribute__((tls_model("initial-exec")));

}  // namespace goshim
