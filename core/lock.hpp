// Runtime locks: a futex mutex that blocks the kernel thread (never parks a
// G) and a one-shot Note for sleeping Ms.
//
// The lock order is in core/lockrank.hpp (the only copy); every Mutex is
// given its rank where it is declared, and the debug build checks the order
// at every acquisition. Holding a runtime lock pins the G to its M
// (M::locks > 0), so the shim passes calls made from signal handlers
// straight to libc.
#pragma once

#include <stdint.h>

#include <atomic>

#include "core/lockrank.hpp"

namespace goshim {

class Mutex {
 public:
  // Every runtime lock is given its rank where it is declared (no default
  // constructor: a rankless Mutex escapes the debug build's order check).
  constexpr explicit Mutex(LockRank r) : rank_(r) {}
  // Inline fast paths: a bucket or queue lock is taken on every park/wake.
  void lock() {
    uint32_t z = 0;
    if (__builtin_expect(!state_.compare_exchange_strong(z, 1, std::memory_order_acquire), 0))
      lock_slow();
    lock_rank_acquire(rank_, this, true);
  }
  bool try_lock() {
    uint32_t z = 0;
    if (!state_.compare_exchange_strong(z, 1, std::memory_order_acquire)) return false;
    lock_rank_acquire(rank_, this, true);
    return true;
  }
  void unlock() {
    lock_rank_release(rank_, this);
    if (__builtin_expect(state_.exchange(0, std::memory_order_release) == 2, 0)) unlock_slow();
  }
  bool held() const { return state_.load(std::memory_order_relaxed) != 0; }
  // The fork child's only thread: unlocked, whoever held it in the parent
  // (the rank stays).
  void reset() { state_.store(0, std::memory_order_relaxed); }

 private:
  void lock_slow();
  void unlock_slow();
  // 0 unlocked, 1 locked, 2 locked with (possible) kernel waiters.
  std::atomic<uint32_t> state_{0};
  LockRank rank_;
};

// Locks for the lifetime of a scope.
class MutexGuard {
 public:
  explicit MutexGuard(Mutex& m) : m_(m) { m_.lock(); }
  ~MutexGuard() { m_.unlock(); }
  MutexGuard(const MutexGuard&) = delete;
  MutexGuard& operator=(const MutexGuard&) = delete;

 private:
  Mutex& m_;
};

// One-shot wakeup for an M (Go's note): sleep blocks the kernel thread until
// wakeup. clear before reuse. Exactly one sleeper, any number of wakers.
class Note {
 public:
  void clear() { key_.store(0, std::memory_order_relaxed); }
  void wakeup();
  void sleep();
  // Sleeps at most ns nanoseconds; returns true if woken.
  bool sleep_for(int64_t ns);
  bool ready() const { return key_.load(std::memory_order_acquire) != 0; }

 private:
  std::atomic<uint32_t> key_{0};
};

// Gives the CPU away in a spin wait whose holder may be preempted:
// sched_yield, or a 50 us sleep for a real-time kernel thread (whose
// sched_yield never lets a lower-priority holder on its CPU run).
// Signal-safe; any thread.
void spin_yield();

// A test-and-test-and-set spinlock for very short sections that must work
// in a signal handler (no futex wait, no M accounting).
class SpinLock {
 public:
  void lock() {
    if (__builtin_expect(v_.exchange(1, std::memory_order_acquire), 0)) lock_slow();
  }
  bool try_lock() { return !v_.exchange(1, std::memory_order_acquire); }
  void unlock() { v_.store(0, std::memory_order_release); }

 private:
  void lock_slow();
  std::atomic<uint32_t> v_{0};
};

}  // namespace goshim
