// Goroutine waits on process-shared futex words without a kernel thread
// each (see sharedwatch.cpp for the design and its invariant).
#pragma once

#include <stdint.h>

namespace goshim {

// Whether the kernel has FUTEX_WAITV (Linux 5.16): without it goroutines
// wait on process-shared words in the kernel, in a blocking call. Any
// thread.
bool watch_available();

// Registers a goroutine about to park on sema for the shared word addr,
// having read val from it: a watcher thread then sleeps on the kernel
// futex of addr and wakes this process's sema waiters of addr when another
// process (or anything in the kernel) wakes it. Returns a handle for
// watch_unregister, or -1 when the tables are full (the caller waits in the
// kernel instead). On user G, no runtime locks held (may create a thread).
int watch_register(const void* addr, uint32_t val);
void watch_unregister(int handle);
// The registered goroutine is now queued on sema (sema_wait's enqueued
// callback, arg: the handle as a pointer): the watcher looks at the words
// again before it sleeps (sharedwatch.cpp, "The look and the sleep").
// No locks, no blocking: any thread.
void watch_kick(void* handle);

// The process is about to end or exec: every watcher leaves the kernel,
// passes on the wakes it may have taken, wakes this process's waiters on
// watched words (they wait again in the kernel) and stops until
// watch_resume; watch_register refuses meanwhile. Returns once all
// watchers acknowledged (or after about a second). No locks, no
// allocation: any thread, also a signal handler or a fork child.
void watch_quiesce();
// A failed exec: the watchers go on. Any thread.
void watch_resume();

// Fork child: the watcher threads are gone. Any thread.
void watch_after_fork();

}  // namespace goshim
