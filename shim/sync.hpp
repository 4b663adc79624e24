// glibc's object layouts (x86-64 and aarch64, glibc 2.36) as the synchronization shims
// see them, and the mutex internals pthread_cond.cpp needs. Every overlay
// is static_asserted to fit the public type, and the static initializers
// (all zero, or a kind/flags field) are valid states of it.
#pragma once

#include <pthread.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdint.h>

#include "core/syncwait.hpp"

namespace goshim::shim {

// struct __pthread_mutex_s. On aarch64 (the generic layout) spins and
// elision are one int __spins, which goshim does not use, and the public
// type is 48 bytes instead of 40; every other offset is the same.
struct MutexObj {
  int lock;            // the lock word (see pthread_mutex.cpp for its protocols)
  unsigned count;      // recursion depth
  int owner;           // tid of the owner, or kInconsistent/kNotRecoverable
  unsigned nusers;
  int kind;            // kMutex* bits; -1 once destroyed
  short spins;
  short elision;
  void* prev;          // robust list links (__pthread_list_t)
  void* next;
};
static_assert(sizeof(MutexObj) <= sizeof(pthread_mutex_t), "pthread_mutex_t overlay");
static_assert(offsetof(MutexObj, kind) == 16, "kind must be where static initializers put it");
static_assert(offsetof(MutexObj, next) == 32, "robust list entry");

// __kind bits (glibc's internal enum, pthreadP.h).
enum : int {
  kMutexKindMask = 3,  // PTHREAD_MUTEX_NORMAL/RECURSIVE/ERRORCHECK/ADAPTIVE
  kMutexRobust = 16,
  kMutexPI = 32,
  kMutexPP = 64,
  kMutexPshared = 128,
  kMutexElision = 256,
  kMutexNoElision = 512,
};

// How mutex_lock_impl is called.
enum class LockMode {
  Lock,           // pthread_mutex_lock/timedlock/clocklock
  Try,            // pthread_mutex_trylock
  CondRelock,     // re-acquisition at the end of a condvar wait (no __nusers++)
  CondContended,  // same, after the waiter was requeued onto the mutex: assume
                  // other waiters (lock word 2) so that unlock wakes the next
};

// The mutex operations (pthread_mutex.cpp). dl: nullptr waits forever.
int mutex_lock_impl(MutexObj* m, const SyncDeadline* dl, LockMode mode);
// decr: false inside a condvar wait (the waiter keeps counting as a user).
int mutex_unlock_impl(MutexObj* m, bool decr);
// The lock word a condvar broadcast may requeue its waiters onto, or
// nullptr for mutexes whose protocol does not allow it (robust, PI, PP,
// process-shared).
int* mutex_requeue_word(MutexObj* m);
// After waiters were requeued onto the word of m: make sure one of them
// will be woken (the word says "contended", or one is woken now).
void mutex_after_requeue(MutexObj* m);

// Timespec validity as glibc checks it.
inline bool valid_nsec(const struct timespec* ts) {
  return ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000;
}
inline bool valid_clock(clockid_t c) { return c == CLOCK_REALTIME || c == CLOCK_MONOTONIC; }

// glibc's encoding of "private" in semaphores and barriers: FUTEX_PRIVATE
// is LLL_PRIVATE (0) and FUTEX_SHARED is LLL_SHARED (128), the value
// XORed into FUTEX_PRIVATE_FLAG by __lll_private_flag.
inline constexpr int kFutexPrivate = 0;
inline constexpr int kFutexShared = 128;

// The highest ceiling among the priority-protect mutexes a kernel thread
// that is not a goroutine holds (0: none), and its kernel tid.
int foreign_pp_max(pthread_t t, pid_t* tid);

}  // namespace goshim::shim
