// futex(2) served in-process: the syscall(SYS_futex, ...) operations that
// programs issue themselves (libstdc++'s atomic::wait, counting_semaphore,
// latch, barrier, std::future, function-local statics; Rust's Mutex,
// Condvar, RwLock, Once, park; hand-written futex code), so that a
// goroutine blocking in one parks instead of blocking its M.
//
// Served: FUTEX_WAIT, FUTEX_WAKE, FUTEX_WAIT_BITSET, FUTEX_WAKE_BITSET,
// FUTEX_REQUEUE, FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP, with FUTEX_PRIVATE_FLAG
// and FUTEX_CLOCK_REALTIME, with the kernel's argument checks, results and
// error codes. Every other operation (PI, requeue-PI, waitv, ...) goes to
// the kernel unchanged.
//
// Private operations are always in-process: every thread of the process
// goes through here (goroutines park on core/sema, foreign threads block on
// a kernel futex of their own, and wakes reach both). A non-private
// operation is in-process too unless its word lies in memory shared with
// other processes (core/memclass), where it goes to the kernel (a
// goroutine waiting there is in a blocking call) and in-process waiters of
// the word are woken as well.
//
// Not seen by in-process waiters: wakes the kernel issues on its own
// (CLONE_CHILD_CLEARTID at thread exit, the robust-list walk of a dead
// thread) and futex calls made without syscall() (inline assembly, static
// binaries, glibc-internal locks).
#pragma once

#include <stdint.h>
#include <time.h>

namespace goshim {

// futex(2) with the kernel's calling convention: the result (>= 0) or
// -errno. Any thread.
long futex_syscall(uint32_t* uaddr, int op, uint32_t val, const struct timespec* timeout,
                   uint32_t* uaddr2, uint32_t val3);

}  // namespace goshim
