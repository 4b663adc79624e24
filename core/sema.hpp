// Address-keyed parking: a user-space futex (Go's sema.go, folly's
// ParkingLot). Every goroutine-aware synchronization primitive is built on
// these three calls.
//
// Waiters are queued per address, FIFO, in buckets hashed by address. The
// value check and the enqueue happen under the bucket lock, so a wake that
// follows a change of the word can never be lost. A waiter that is not a
// goroutine (a foreign kernel thread, g0, code running before init) waits
// on a kernel futex of its own; wakes reach both kinds alike.
//
// Lock order: bucket < P.timers < sched.lock (a timed wait arms its timer
// while holding the bucket lock; wakes ready Gs after dropping it).
#pragma once

#include <stdint.h>

#include "core/gmp.hpp"

namespace goshim {

// Registers sema's wait interrupter (runtime init).
void sema_init();
// In a fork child: no waiter survives (fork.hpp).
void sema_after_fork();

// Parks the caller while *(uint32_t*)addr == val. deadline: absolute
// CLOCK_MONOTONIC nanoseconds, 0 for none. Returns 0 when woken (spurious
// wakeups are possible: callers re-check their condition), EAGAIN if the
// value differed, ETIMEDOUT, or EINTR when a signal interrupted the wait.
int sema_wait(const void* addr, uint32_t val, int64_t deadline, WaitReason reason,
              uint32_t bitset = ~0u);

// Wakes up to n waiters on addr whose bitset intersects bitset. Returns the
// number woken. Any thread.
int sema_wake(const void* addr, int n, uint32_t bitset = ~0u);

// Wakes up to nwake waiters on from and moves up to nrequeue of the rest to
// to. If check is true and *from != val, does nothing and returns -EAGAIN.
// Returns woken + requeued.
int sema_requeue(const void* from, const void* to, int nwake, int nrequeue, bool check,
                 uint32_t val);

// Interrupts gp's sema wait, if it is in one (the wait returns EINTR).
// Returns true if gp was woken.
bool sema_interrupt(G* gp);

// Number of waiters queued on addr (diagnostics and tests).
int sema_nwaiters(const void* addr);

// Converts a CLOCK_REALTIME absolute time to a monotonic deadline (0 when
// ts is null). Clock jumps during the wait are not followed.
int64_t deadline_from_abs(clockid_t clk, const struct timespec* ts);

}  // namespace goshim
