// The waiting layer under every goroutine-aware synchronization primitive
// (shim/pthread_mutex.cpp, pthread_cond.cpp, pthread_rwlock.cpp,
// pthread_barrier.cpp, pthread_spin.cpp, semaphore.cpp): wait while a
// 32-bit word holds a value, wake waiters of a word, spin or yield politely.
//
// One call serves every kind of caller (DESIGN.md decision 10):
//   - a goroutine parks (core/sema); its M runs other goroutines;
//   - a foreign kernel thread, g0, or code running before init blocks in
//     the kernel on a futex of its own (sema's foreign path), so in-process
//     wakes reach both kinds alike;
//   - a process-shared object (shared = true) uses the kernel futex on the
//     word itself, so other processes can wake it; a goroutine does so
//     inside a blocking call (its P is handed off), never pinning its M.
#pragma once

#include <stdint.h>
#include <time.h>

#include "arch/arch.hpp"
#include "core/gmp.hpp"
#include "core/sema.hpp"

namespace goshim {

// An absolute deadline on CLOCK_REALTIME or CLOCK_MONOTONIC; abs == nullptr
// means none. The caller has validated it (tv_nsec in range).
struct SyncDeadline {
  clockid_t clk = CLOCK_REALTIME;
  const struct timespec* abs = nullptr;
};

// Blocks the caller while *(uint32_t*)addr == val (checked atomically with
// the enqueue, so no wake-up is lost). Returns 0 when woken (or
// spuriously), EAGAIN if the word differed, ETIMEDOUT, or EINTR when a
// signal handler interrupted the wait and, as for the kernel's futex wait,
// the wait is not restarted (it is when untimed and the handler has
// SA_RESTART). endaddr (in-process waits only): see sema_wait. Any thread.
// cancellable: a cancellation point (see sema_wait): EINTR when the
// calling goroutine is canceled; the caller acts on it.
// lock: the caller waits to take a lock and understands a hand-over
// (sema_wait, sema_release_lock: the wait may return kSemaHandoff, and the
// caller then holds the lock). For a shared word only a goroutine parked
// on sema (watched word) can be handed the lock, by a releaser of this
// process (sync_release_lock); a kernel waiter never is.
int sync_wait(const void* addr, uint32_t val, const SyncDeadline& dl, WaitReason why, bool shared,
              uint32_t bitset = ~0u, const void** endaddr = nullptr, bool cancellable = false,
              const SemaLockWait* lock = nullptr);

// Wakes up to n waiters of addr whose bitset intersects bitset. Returns the
// number woken (for shared words: as the kernel reports it). Any thread.
int sync_wake(const void* addr, int n, bool shared, uint32_t bitset = ~0u);

// A lock's release by its owner (sema_release_lock), process-shared words
// included: a hand-over goes only to a waiter of this process parked on
// sema; when the word is freed with waiters (above wake_above) and no such
// waiter was woken, the kernel's waiters get the wake (other processes,
// kernel threads here). Any thread.
LockRelease sync_release_lock(uint32_t* word, uint32_t contended, uint32_t unlocked,
                              uint32_t wake_above, bool shared);

// Whether a lock waiter should spin once more before blocking (Go's
// sync_runtime_canSpin): only a few rounds, only on a multicore machine,
// only while another P is running (the holder may be on it), and, when
// other goroutines wait for this P, only while the holder (owner: its tid,
// 0 if unknown) is a goroutine running on another M. Any thread.
bool sync_can_spin(int iter, int32_t owner = 0);

// One round of active spinning (PAUSE n times). Any thread.
inline void sync_pause(int n) {
  for (int i = 0; i < n; i++) arch::cpu_relax();
}

// Gives up the processor: a goroutine yields to the others (gosched), a
// foreign thread calls sched_yield. Any thread.
void sync_yield();

}  // namespace goshim
