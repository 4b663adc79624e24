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
// Lock order: core/lockrank.hpp (a timed wait arms its timer while holding
// the bucket lock; wakes ready Gs after dropping it).
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
// endaddr, if given, receives the address the caller was queued on when
// the wait ended: addr, or the target of a sema_requeue (so a condition
// variable waiter knows it was moved onto the mutex).
// A goroutine that may park (can_park) parks; any other caller (foreign
// thread, g0, a G inside a blocking call or a runtime critical section,
// code running before init) blocks in the kernel on a futex of its own.
// cancellable: the wait is a cancellation point; a goroutine with a
// pending pthread_cancel does not sleep (EINTR), and one canceled while
// asleep is interrupted (EINTR): the caller then acts on it.
// enqueued(earg), if given, is called once a parking goroutine is in the
// queue (after the value check, on g0 or the next G's stack once the bucket
// is unlocked: it must not block or take runtime locks); not for a wait that
// returns at once nor for a foreign waiter.
// lock, if given: the caller is a lock's waiter that understands a
// hand-over (sema_release_lock; the wait may then return kSemaHandoff).
struct SemaLockWait {
  int64_t since;  // when this attempt to take the lock began waiting (nanotime), not 0
  bool front;     // queue ahead of the waiters of its priority (woken, it found the lock taken)
  // The lock word a hand-over to this waiter stores (a tid word's owner
  // id and flags); 0: the word is left as it is (the 0/1/2 protocols).
  uint32_t word = 0;
};
int sema_wait(const void* addr, uint32_t val, int64_t deadline, WaitReason reason,
              uint32_t bitset = ~0u, const void** endaddr = nullptr, bool cancellable = false,
              void (*enqueued)(void*) = nullptr, void* earg = nullptr,
              const SemaLockWait* lock = nullptr);

// Whether the caller is a goroutine that may park right now: running on
// its M with a P, outside any runtime critical section. Any thread.
inline bool can_park() {
  G* gp = getg();
  return gp && !gp->is_g0() && runtime_up.load(std::memory_order_relaxed) &&
         gp->status.load(std::memory_order_relaxed) == GStatus::Running &&
         gp->m->locks.load(std::memory_order_relaxed) == 0;
}

// Wakes up to n waiters on addr whose bitset intersects bitset. Returns the
// number woken. Any thread.
int sema_wake(const void* addr, int n, uint32_t bitset = ~0u);

// A hand-over: takes every waiter on addr off its queue, calls grant(n,
// arg) with their number before any of them can run, then wakes them;
// their waits return kSemaHandoff. The caller passes the object to them
// (a writer leaving an rwlock to the readers that wait). Returns n. Any
// thread.
inline constexpr int kSemaHandoff = 1 << 20;  // not an errno value
int sema_wake_handoff(const void* addr, void (*grant)(int n, void* arg), void* arg);

// How long a lock waiter may wait before the lock is handed to it
// (Go's sync.Mutex starvationThresholdNs).
inline constexpr int64_t kLockStarveNs = 1000 * 1000;

// A lock's release by its owner (Go's starvation mode, decided per
// waiter). `contended` is the word's value when locked with waiters (only
// the owner takes the word from it; waiters store it again). When the word
// holds `contended` and the first waiter queued on it is a lock waiter
// (sema_wait's `lock`) whose attempt has waited kLockStarveNs or more, the
// lock is handed to it: it is taken off the queue and its wait returns
// kSemaHandoff, while the word is left as it is (locked with waiters:
// every locker, in any protocol, finds it taken, and the new owner's
// release wakes the next waiter). Otherwise the word is exchanged with
// `unlocked` and, if it held more than `wake_above`, the first waiter is
// woken. Returns what happened; a goroutine given the lock is readied in
// the caller's runnext (a goroutine caller should let it run: Go's
// releaser yields). Without waiters this costs what the exchange and a
// sema_wake cost. Any thread.
// A waiter whose SemaLockWait has a `word` gets that value stored in the
// word at the hand-over (a tid-word mutex: the new owner's id).
// info, if given, receives the word's value before a release that freed
// it (`contended` after a hand-over) and whether a waiter was woken or
// handed the lock (a process-shared lock wakes the kernel's waiters when
// none was: syncwait's sync_release_lock).
enum class LockRelease { Freed, HandedToThread, HandedToG };
struct LockReleaseInfo {
  uint32_t old;
  bool woke;
};
LockRelease sema_release_lock(uint32_t* word, uint32_t contended, uint32_t unlocked,
                              uint32_t wake_above, LockReleaseInfo* info = nullptr);

// Wakes the G waiters on addr that were enqueued while the word held
// another value than cur (any, if all is true). Returns the number woken.
// Any thread.
int sema_wake_stale(const void* addr, uint32_t cur, bool all);

// Whether a G waiter enqueued on addr expects the value val (its wait
// ends when the word differs from val). Any thread.
bool sema_has_waiter(const void* addr, uint32_t val);

// Wakes up to nwake waiters on from and moves up to nrequeue of the rest to
// to. If check is true and *from != val, does nothing and returns -EAGAIN.
// Returns woken + requeued.
int sema_requeue(const void* from, const void* to, int nwake, int nrequeue, bool check,
                 uint32_t val);

// Interrupts gp's sema wait, if it is in one (the wait returns EINTR).
// Returns true if gp was woken.
bool sema_interrupt(G* gp);

// A kernel thread that is not a goroutine (every thread in 1:1 mode) in a
// cancellable wait: marked for the duration (ForeignCancelWait), so that
// pthread_cancel can end the wait at once (foreign_cancel_kick: SIGCANCEL,
// which ends the timed futex wait with EINTR; glibc's handler does nothing
// else in deferred mode) instead of at the end of its time slice.
struct ForeignCancelWait {
  ForeignCancelWait();
  ~ForeignCancelWait();
};
// After glibc marked thread t (a pthread_t, its thread pointer) canceled.
void foreign_cancel_kick(unsigned long t);
// Inside a ForeignCancelWait whose kernel thread sleeps on the
// process-shared word with SIGCANCEL blocked: pthread_cancel's kick wakes
// the word's waiters (a shared futex wake; the others look and sleep
// again). nullptr: no more.
void foreign_cancel_publish_shared(const void* word);

// Number of waiters queued on addr (diagnostics and tests).
int sema_nwaiters(const void* addr);

// Converts a CLOCK_REALTIME absolute time to a monotonic deadline (0 when
// ts is null). Clock jumps during the wait are not followed.
int64_t deadline_from_abs(clockid_t clk, const struct timespec* ts);

}  // namespace goshim
