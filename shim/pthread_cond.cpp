// pthread_cond_*: condition variables over core/syncwait, in glibc's 48
// bytes (PTHREAD_COND_INITIALIZER is all zero; the clock and pshared
// attributes live in bits 0-1 of __wrefs, where glibc keeps them).
//
//   seq    @0   the futex word: incremented by a signal or broadcast that
//               finds waiters. A waiter reads it (holding the mutex), drops
//               the mutex, and waits while it is unchanged, so a signal
//               between the two can never be lost; FIFO order among the
//               queued waiters means a signal wakes the oldest one, so a
//               wake-up is never stolen by a later waiter.
//   mutex  @8   the mutex of the current waiters, for broadcast's requeue
//               (kMixedMutex when waiters used different mutexes).
//   wrefs  @36  bit 0 pshared, bit 1 CLOCK_MONOTONIC, bit 2 a destroyer
//               waits, bits 3.. waiters still referencing the condvar.
//
// Broadcast wakes one waiter and requeues the others onto the mutex's lock
// word (no thundering herd); each is woken by an unlock in turn. A waiter
// that a signal or broadcast dequeued was already counted out of wrefs by
// the waker, so it never touches the condvar again: the condvar may be
// destroyed while it still waits for the mutex. Waiters that leave on
// their own (timeout, a changed seq) count themselves out, and
// pthread_cond_destroy waits for them, as glibc's does.
//
// Process-shared condvars wait on the kernel futex (no requeue; waiters
// count themselves out). They interoperate with other goshim processes,
// not with native glibc ones (glibc's algorithm differs).
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "core/sema.hpp"
#include "core/signal.hpp"
#include "shim/shim.hpp"
#include "shim/sync.hpp"

using namespace goshim;
using namespace goshim::shim;

namespace {

struct CondObj {
  uint32_t seq;
  uint32_t pad0;
  MutexObj* mutex;
  uint32_t pad1[5];
  uint32_t wrefs;
  uint32_t pad2[2];
};
static_assert(sizeof(CondObj) == sizeof(pthread_cond_t), "pthread_cond_t overlay");
static_assert(offsetof(CondObj, wrefs) == 36, "__wrefs holds the attributes, as in glibc");

constexpr uint32_t kShared = 1;      // __PTHREAD_COND_SHARED_MASK
constexpr uint32_t kMonotonic = 2;   // __PTHREAD_COND_CLOCK_MONOTONIC_MASK
constexpr uint32_t kDestroying = 4;  // pthread_cond_destroy waits for wrefs >> 3 == 0
constexpr uint32_t kRef = 8;
MutexObj* const kMixedMutex = (MutexObj*)~(uintptr_t)0;

// Drops n references; wakes a waiting pthread_cond_destroy after the last.
void release_refs(CondObj* c, uint32_t n) {
  uint32_t v = __atomic_fetch_sub(&c->wrefs, n * kRef, __ATOMIC_RELEASE);
  if ((v >> 3) == n && (v & kDestroying))
    sync_wake(&c->wrefs, INT_MAX, v & kShared);  // address only: c may be gone
}

// Cancellation (pthread_cond_wait is a cancellation point): pending for
// the calling goroutine, or (a foreign thread) for glibc's record.
bool canceled(G* self) { return self ? cancel_pending(self) : false; }

// Acts on a pending cancellation with the mutex held again, as POSIX wants
// for the cleanup handlers (glibc's __condvar_cleanup_waiting does the
// same). Does not return if the caller is canceled.
void act_on_cancel(G* self) {
  if (self)
    cancel_point();
  else
    pthread_testcancel();  // glibc's: a foreign thread's cancellation
}

int wait_common(CondObj* c, MutexObj* m, clockid_t clk, const struct timespec* abstime) {
  G* self = shim::user_g();
  uint32_t flags = __atomic_fetch_add(&c->wrefs, kRef, __ATOMIC_ACQUIRE);
  bool shared = flags & kShared;
  if (!shared) {
    MutexObj* cur = __atomic_load_n(&c->mutex, __ATOMIC_RELAXED);
    if (cur != m) {
      MutexObj* v = (flags >> 3) == 0 ? m : kMixedMutex;  // alone: (re)bind
      __atomic_store_n(&c->mutex, v, __ATOMIC_RELAXED);
    }
  }
  uint32_t s = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
  int err = mutex_unlock_impl(m, false);
  if (err) {
    release_refs(c, 1);
    return err;
  }
  SyncDeadline dl{clk, abstime};
  const void* end = &c->seq;
  bool counted_out = false;  // a waker dequeued us and dropped our reference
  int r;
  for (;;) {
    r = sync_wait(&c->seq, s, dl, WaitReason::Cond, shared, ~0u, &end, true);
    if (end != &c->seq) {  // requeued onto the mutex by a broadcast: signalled
      counted_out = true;
      if (r != EINTR) r = 0;  // a timeout there came after the wake-up
      break;
    }
    if (r == 0 && !shared) {  // dequeued by a signal or broadcast
      counted_out = true;
      break;
    }
    if (r == EINTR) {
      // Canceled (goshim interrupted the wait), or a foreign thread's
      // signal: leave with the mutex held and act on it.
      if (canceled(self) || !self) break;
      // Signals do not end a condvar wait (glibc restarts it).
      if (__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) == s) continue;
    }
    break;
  }
  if (!counted_out) release_refs(c, 1);
  int result = r == ETIMEDOUT ? ETIMEDOUT : 0;
  err = mutex_lock_impl(m, nullptr, end != &c->seq ? LockMode::CondContended
                                                   : LockMode::CondRelock);
  // glibc's wait acts on a pending cancellation in its futex call even when
  // the deadline has passed (but not before 1970: no call then).
  bool timed_out = r == ETIMEDOUT && abstime && abstime->tv_sec >= 0;
  if (r == EINTR || timed_out) act_on_cancel(self);  // a spurious wake-up if not canceled
  return err ? err : result;
}

}  // namespace

GOSHIM_EXPORT int pthread_cond_init(pthread_cond_t* cond, const pthread_condattr_t* attr) {
  CondObj* c = (CondObj*)cond;
  memset(c, 0, sizeof *c);
  if (attr) {
    int v = *(const int*)attr;
    uint32_t w = 0;
    if (v & 1) w |= kShared;
    if (((v >> 1) & 1) == CLOCK_MONOTONIC) w |= kMonotonic;
    c->wrefs = w;
  }
  return 0;
}

GOSHIM_EXPORT int pthread_cond_destroy(pthread_cond_t* cond) {
  CondObj* c = (CondObj*)cond;
  uint32_t w = __atomic_fetch_or(&c->wrefs, kDestroying, __ATOMIC_ACQUIRE);
  while (w >> 3) {
    SyncDeadline none;
    sync_wait(&c->wrefs, w | kDestroying, none, WaitReason::Cond, w & kShared);
    w = __atomic_load_n(&c->wrefs, __ATOMIC_ACQUIRE);
  }
  return 0;
}

namespace {

void cond_signal(pthread_cond_t* cond) {
  CondObj* c = (CondObj*)cond;
  uint32_t w = __atomic_load_n(&c->wrefs, __ATOMIC_SEQ_CST);
  if ((w >> 3) == 0) return;  // nobody to wake (see the file comment on ordering)
  __atomic_fetch_add(&c->seq, 1, __ATOMIC_SEQ_CST);
  if (w & kShared) {
    sync_wake(&c->seq, 1, true);
    return;
  }
  int n = sema_wake(&c->seq, 1);
  if (n) release_refs(c, (uint32_t)n);
}

void cond_broadcast(pthread_cond_t* cond) {
  CondObj* c = (CondObj*)cond;
  uint32_t w = __atomic_load_n(&c->wrefs, __ATOMIC_SEQ_CST);
  if ((w >> 3) == 0) return;
  __atomic_fetch_add(&c->seq, 1, __ATOMIC_SEQ_CST);
  if (w & kShared) {
    sync_wake(&c->seq, INT_MAX, true);
    return;
  }
  MutexObj* m = __atomic_load_n(&c->mutex, __ATOMIC_RELAXED);
  int* word = (m && m != kMixedMutex) ? mutex_requeue_word(m) : nullptr;
  int n;
  if (word) {
    // Wake one, requeue the rest onto the mutex: they come out one unlock
    // at a time instead of all fighting for the mutex at once.
    n = sema_requeue(&c->seq, word, 1, INT_MAX, false, 0);
    if (n > 1) mutex_after_requeue(m);
  } else {
    n = sema_wake(&c->seq, INT_MAX);
  }
  if (n > 0) release_refs(c, (uint32_t)n);
}

}  // namespace

// (preempt_check: see shim.hpp; a loop that signals a condition variable
// under a mutex spends its slice inside goshim.)
GOSHIM_EXPORT int pthread_cond_signal(pthread_cond_t* cond) {
  cond_signal(cond);
  shim::preempt_check();
  return 0;
}

GOSHIM_EXPORT int pthread_cond_broadcast(pthread_cond_t* cond) {
  cond_broadcast(cond);
  shim::preempt_check();
  return 0;
}

GOSHIM_EXPORT int pthread_cond_wait(pthread_cond_t* cond, pthread_mutex_t* mutex) {
  return wait_common((CondObj*)cond, (MutexObj*)mutex, CLOCK_REALTIME, nullptr);
}

GOSHIM_EXPORT int pthread_cond_timedwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                         const struct timespec* abstime) {
  if (!valid_nsec(abstime)) return EINVAL;
  CondObj* c = (CondObj*)cond;
  clockid_t clk = (__atomic_load_n(&c->wrefs, __ATOMIC_RELAXED) & kMonotonic) ? CLOCK_MONOTONIC
                                                                              : CLOCK_REALTIME;
  return wait_common(c, (MutexObj*)mutex, clk, abstime);
}

GOSHIM_EXPORT int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                         clockid_t clk, const struct timespec* abstime) {
  if (!valid_nsec(abstime)) return EINVAL;
  if (!valid_clock(clk)) return EINVAL;
  return wait_common((CondObj*)cond, (MutexObj*)mutex, clk, abstime);
}

// ---- pthread_condattr_* (glibc: bit 0 pshared, bit 1 the clock id) ------------

GOSHIM_EXPORT int pthread_condattr_init(pthread_condattr_t* attr) {
  memset(attr, 0, sizeof *attr);
  return 0;
}

GOSHIM_EXPORT int pthread_condattr_destroy(pthread_condattr_t*) { return 0; }

GOSHIM_EXPORT int pthread_condattr_getpshared(const pthread_condattr_t* attr, int* pshared) {
  *pshared = (*(const int*)attr & 1) ? PTHREAD_PROCESS_SHARED : PTHREAD_PROCESS_PRIVATE;
  return 0;
}

GOSHIM_EXPORT int pthread_condattr_setpshared(pthread_condattr_t* attr, int pshared) {
  if (pshared != PTHREAD_PROCESS_PRIVATE && pshared != PTHREAD_PROCESS_SHARED) return EINVAL;
  int* v = (int*)attr;
  *v = (*v & ~1) | (pshared != PTHREAD_PROCESS_PRIVATE);
  return 0;
}

GOSHIM_EXPORT int pthread_condattr_getclock(const pthread_condattr_t* attr, clockid_t* clk) {
  *clk = (*(const int*)attr >> 1) & 1;
  return 0;
}

GOSHIM_EXPORT int pthread_condattr_setclock(pthread_condattr_t* attr, clockid_t clk) {
  if (clk != CLOCK_MONOTONIC && clk != CLOCK_REALTIME) return EINVAL;
  int* v = (int*)attr;
  *v = (*v & ~2) | ((int)clk << 1);
  return 0;
}
