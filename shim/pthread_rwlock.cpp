// pthread_rwlock_*: reader-writer locks over core/syncwait, in glibc's 56
// bytes (PTHREAD_RWLOCK_INITIALIZER is all zero; the kind is in __flags at
// offset 48 and the pshared flag in __shared, where glibc keeps them, so
// PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP works).
//
//   state   @0   bit 0: write-locked; bits 1..: readers holding it
//   nwwait  @4   writers waiting
//   rseq    @8   readers' futex word, bumped when readers may proceed
//   wseq    @12  writers' futex word, bumped when a writer may proceed
//   nrwait  @16  readers waiting
//   cur_writer @24  the writer's tid (EDEADLK checks, and unlock's choice)
//
// A waiter registers (nrwait/nwwait), reads its futex word, re-checks the
// state and waits while the word is unchanged; whoever releases the lock
// changes the state, then reads the counters and bumps the words:
//
//   waiter                        releaser
//   nXwait++          [S]         state change     [S]
//   seq = Xseq        [L]         (seq_cst)
//   re-check state    [L]         read nXwait      [L]  -> Xseq++, wake
//
// so either the waiter sees the new state or the releaser sees the waiter.
// A writer leaving a private rwlock to waiting readers hands it over, as
// glibc's read phase does: the readers asleep on rseq become holders
// before any of them runs (sema_wake_handoff), so a writer that comes
// back first waits for them instead of sending them back to sleep (at
// one processor, PREFER_WRITER_NONRECURSIVE_NP woke and re-parked every
// waiting reader at each write).
// Kinds, as glibc: PREFER_READER_NP (default) and PREFER_WRITER_NP let
// readers in whenever no writer holds the lock, and a writer lets readers
// that wait for the lock go first; PREFER_WRITER_NONRECURSIVE_NP makes new
// readers wait while a writer waits, and hands the lock from writer to
// writer. Process-shared rwlocks use
// the kernel futex; they interoperate with other goshim processes only.
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "core/scstore.hpp"
#include "core/sema.hpp"
#include "core/tcb.hpp"
#include "shim/shim.hpp"
#include "shim/sync.hpp"

using namespace goshim;
using namespace goshim::shim;

namespace {

struct RwObj {
  uint32_t state;
  uint32_t nwwait;
  uint32_t rseq;
  uint32_t wseq;
  uint32_t nrwait;
  uint32_t pad4;
  int cur_writer;
  int shared;
  signed char rwelision;
  unsigned char pad1[7];
  unsigned long pad2;
  unsigned flags;
};
static_assert(sizeof(RwObj) == sizeof(pthread_rwlock_t), "pthread_rwlock_t overlay");
static_assert(offsetof(RwObj, flags) == 48, "__flags must be where static initializers put it");
static_assert(offsetof(RwObj, cur_writer) == 24 && offsetof(RwObj, shared) == 28, "glibc layout");

constexpr uint32_t kWriter = 1;
constexpr uint32_t kReader = 2;
constexpr uint32_t kMaxReaders = (1u << 30) - 1;

struct RwAttr {  // struct pthread_rwlockattr
  int lockkind;
  int pshared;
};
static_assert(sizeof(RwAttr) <= sizeof(pthread_rwlockattr_t), "pthread_rwlockattr_t overlay");

// The id recorded as the writer (see tcb::shared_tid).
inline int owner_id(const RwObj* rw) {
  return rw->shared ? tcb::shared_tid() : tcb::self_tid();
}

inline uint32_t ld(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }

bool prefer_writer(const RwObj* rw) {
  return __atomic_load_n(&rw->flags, __ATOMIC_RELAXED) ==
         PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP;
}

bool readers_blocked(const RwObj* rw, uint32_t s) {
  return (s & kWriter) || (prefer_writer(rw) && ld(&rw->nwwait) != 0);
}

// Whether a writer must let the lock go to waiting readers first.
bool writer_blocked(const RwObj* rw, uint32_t s) {
  return s != 0 || (!prefer_writer(rw) && ld(&rw->nrwait) != 0);
}

void wake_readers(RwObj* rw) {
  __atomic_fetch_add(&rw->rseq, 1, __ATOMIC_SEQ_CST);
  sync_wake(&rw->rseq, INT_MAX, rw->shared);
}

// sema_wake_handoff's grant: the n readers taken hold the lock, in place
// of the writer.
void grant_readers(int n, void* arg) {
  RwObj* rw = (RwObj*)arg;
  sc_store(&rw->state, (uint32_t)n * kReader);  // [S]
}

void wake_writer(RwObj* rw) {
  __atomic_fetch_add(&rw->wseq, 1, __ATOMIC_SEQ_CST);
  sync_wake(&rw->wseq, 1, rw->shared);
}

int check_timeout(clockid_t clk, const struct timespec* abstime) {
  if (abstime && (!valid_clock(clk) || !valid_nsec(abstime))) return EINVAL;
  return 0;
}

int rdlock(RwObj* rw, clockid_t clk, const struct timespec* abstime, bool try_only) {
  if (int e = check_timeout(clk, abstime)) return e;
  if (__atomic_load_n(&rw->cur_writer, __ATOMIC_RELAXED) == owner_id(rw)) return EDEADLK;
  SyncDeadline dl{clk, abstime};
  for (;;) {
    uint32_t s = ld(&rw->state);
    if (!readers_blocked(rw, s)) {
      if ((s >> 1) >= kMaxReaders) return EAGAIN;
      if (__atomic_compare_exchange_n(&rw->state, &s, s + kReader, false, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED))
        return 0;
      continue;
    }
    if (try_only) return EBUSY;
    __atomic_fetch_add(&rw->nrwait, 1, __ATOMIC_SEQ_CST);
    uint32_t seq = ld(&rw->rseq);
    int r = 0;
    if (readers_blocked(rw, ld(&rw->state)))
      r = sync_wait(&rw->rseq, seq, dl, WaitReason::RWLock, rw->shared);
    uint32_t left = __atomic_sub_fetch(&rw->nrwait, 1, __ATOMIC_SEQ_CST);
    if (r == kSemaHandoff) return 0;  // a leaving writer made this thread a holder
    // The last waiting reader gone without the lock: a writer that let the
    // readers go first may proceed.
    if (left == 0 && ld(&rw->state) == 0 && ld(&rw->nwwait) != 0) wake_writer(rw);
    if (r == ETIMEDOUT) return ETIMEDOUT;
  }
}

int wrlock(RwObj* rw, clockid_t clk, const struct timespec* abstime, bool try_only) {
  if (!try_only) {
    if (int e = check_timeout(clk, abstime)) return e;
    if (__atomic_load_n(&rw->cur_writer, __ATOMIC_RELAXED) == owner_id(rw)) return EDEADLK;
  }
  SyncDeadline dl{clk, abstime};
  for (;;) {
    uint32_t s = ld(&rw->state);
    if (!writer_blocked(rw, s)) {
      if (__atomic_compare_exchange_n(&rw->state, &s, kWriter, false, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED)) {
        __atomic_store_n(&rw->cur_writer, owner_id(rw), __ATOMIC_RELAXED);
        return 0;
      }
      continue;
    }
    if (try_only) return EBUSY;
    __atomic_fetch_add(&rw->nwwait, 1, __ATOMIC_SEQ_CST);
    uint32_t seq = ld(&rw->wseq);
    int r = 0;
    if (writer_blocked(rw, ld(&rw->state)))
      r = sync_wait(&rw->wseq, seq, dl, WaitReason::RWLock, rw->shared);
    uint32_t left = __atomic_sub_fetch(&rw->nwwait, 1, __ATOMIC_SEQ_CST);
    if (r == ETIMEDOUT) {
      // Readers held back for us may go now; a wake-up meant for us goes on.
      if (left == 0 && prefer_writer(rw) && ld(&rw->nrwait) != 0) wake_readers(rw);
      if (left != 0 && ld(&rw->state) == 0) wake_writer(rw);
      return ETIMEDOUT;
    }
  }
}

int unlock(RwObj* rw) {
  if (__atomic_load_n(&rw->cur_writer, __ATOMIC_RELAXED) == owner_id(rw)) {
    __atomic_store_n(&rw->cur_writer, 0, __ATOMIC_RELAXED);
    if (!rw->shared && ld(&rw->nrwait) != 0 && !(prefer_writer(rw) && ld(&rw->nwwait) != 0)) {
      // Readers wait and no writer goes before them: hand the lock to the
      // readers asleep; the state goes from kWriter to their count in one
      // store (grant_readers). rseq bumped first: a reader about to sleep
      // retries instead.
      __atomic_fetch_add(&rw->rseq, 1, __ATOMIC_SEQ_CST);
      sema_wake_handoff(&rw->rseq, grant_readers, rw);  // [S] state
      // [L] after the grant: a reader that registered meanwhile and may
      // sleep on the new rseq retries; a writer that did is woken to
      // look again (the last reader's unlock wakes one as well).
      if (ld(&rw->nrwait) != 0) wake_readers(rw);
      if (ld(&rw->nwwait) != 0) wake_writer(rw);
      return 0;
    }
    sc_store(&rw->state, 0);  // [S] readers cannot hold it now
    bool writers = ld(&rw->nwwait) != 0;              // [L]
    if (writers && prefer_writer(rw)) {
      wake_writer(rw);  // writer-to-writer hand-over; readers keep waiting
      return 0;
    }
    if (ld(&rw->nrwait) != 0) wake_readers(rw);
    if (writers) wake_writer(rw);
    return 0;
  }
  uint32_t s = ld(&rw->state);
  for (;;) {
    if ((s >> 1) == 0 || (s & kWriter)) return EPERM;  // not read-locked (glibc: undefined)
    if (__atomic_compare_exchange_n(&rw->state, &s, s - kReader, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
      break;
  }
  if ((s >> 1) == 1 && ld(&rw->nwwait) != 0) wake_writer(rw);  // the last reader left
  return 0;
}

}  // namespace

GOSHIM_EXPORT int pthread_rwlock_init(pthread_rwlock_t* rwlock, const pthread_rwlockattr_t* attr) {
  RwObj* rw = (RwObj*)rwlock;
  memset(rw, 0, sizeof *rw);
  if (attr) {
    const RwAttr* a = (const RwAttr*)attr;
    rw->flags = (unsigned)a->lockkind;
    rw->shared = a->pshared != PTHREAD_PROCESS_PRIVATE;
  }
  return 0;
}

GOSHIM_EXPORT int pthread_rwlock_destroy(pthread_rwlock_t*) { return 0; }

GOSHIM_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t* rw) {
  return rdlock((RwObj*)rw, CLOCK_REALTIME, nullptr, false);
}

GOSHIM_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t* rw) {
  int r = rdlock((RwObj*)rw, CLOCK_REALTIME, nullptr, true);
  if (r == EBUSY) shim::preempt_check();
  return r;
}

GOSHIM_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t* rw, const struct timespec* abstime) {
  return rdlock((RwObj*)rw, CLOCK_REALTIME, abstime, false);
}

GOSHIM_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t* rw, clockid_t clk,
                                             const struct timespec* abstime) {
  return rdlock((RwObj*)rw, clk, abstime, false);
}

GOSHIM_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t* rw) {
  return wrlock((RwObj*)rw, CLOCK_REALTIME, nullptr, false);
}

GOSHIM_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t* rw) {
  int r = wrlock((RwObj*)rw, CLOCK_REALTIME, nullptr, true);
  if (r == EBUSY) shim::preempt_check();
  return r;
}

GOSHIM_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t* rw, const struct timespec* abstime) {
  return wrlock((RwObj*)rw, CLOCK_REALTIME, abstime, false);
}

GOSHIM_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t* rw, clockid_t clk,
                                             const struct timespec* abstime) {
  return wrlock((RwObj*)rw, clk, abstime, false);
}

GOSHIM_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t* rw) {
  int r = unlock((RwObj*)rw);
  shim::preempt_check();  // see shim.hpp
  return r;
}

// ---- pthread_rwlockattr_* ---------------------------------------------------------

GOSHIM_EXPORT int pthread_rwlockattr_init(pthread_rwlockattr_t* attr) {
  memset(attr, 0, sizeof *attr);
  RwAttr* a = (RwAttr*)attr;
  a->lockkind = PTHREAD_RWLOCK_DEFAULT_NP;
  a->pshared = PTHREAD_PROCESS_PRIVATE;
  return 0;
}

GOSHIM_EXPORT int pthread_rwlockattr_destroy(pthread_rwlockattr_t*) { return 0; }

GOSHIM_EXPORT int pthread_rwlockattr_getkind_np(const pthread_rwlockattr_t* attr, int* pref) {
  *pref = ((const RwAttr*)attr)->lockkind;
  return 0;
}

GOSHIM_EXPORT int pthread_rwlockattr_setkind_np(pthread_rwlockattr_t* attr, int pref) {
  if (pref != PTHREAD_RWLOCK_PREFER_READER_NP && pref != PTHREAD_RWLOCK_PREFER_WRITER_NP &&
      pref != PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP)
    return EINVAL;
  ((RwAttr*)attr)->lockkind = pref;
  return 0;
}

GOSHIM_EXPORT int pthread_rwlockattr_getpshared(const pthread_rwlockattr_t* attr, int* pshared) {
  *pshared = ((const RwAttr*)attr)->pshared;
  return 0;
}

GOSHIM_EXPORT int pthread_rwlockattr_setpshared(pthread_rwlockattr_t* attr, int pshared) {
  if (pshared != PTHREAD_PROCESS_PRIVATE && pshared != PTHREAD_PROCESS_SHARED) return EINVAL;
  ((RwAttr*)attr)->pshared = pshared;
  return 0;
}

// ---- glibc's old __pthread_* names (still exported, GLIBC_2.2.5) ------------------
#pragma GCC diagnostic push
#ifndef __clang__  // gcc only: clang has no -Wmissing-attributes
#pragma GCC diagnostic ignored "-Wmissing-attributes"  // same function, fewer declared attributes
#endif
GOSHIM_EXPORT int __pthread_rwlock_init(pthread_rwlock_t*, const pthread_rwlockattr_t*)
    __attribute__((alias("pthread_rwlock_init")));
GOSHIM_EXPORT int __pthread_rwlock_destroy(pthread_rwlock_t*)
    __attribute__((alias("pthread_rwlock_destroy")));
GOSHIM_EXPORT int __pthread_rwlock_rdlock(pthread_rwlock_t*)
    __attribute__((alias("pthread_rwlock_rdlock")));
GOSHIM_EXPORT int __pthread_rwlock_tryrdlock(pthread_rwlock_t*)
    __attribute__((alias("pthread_rwlock_tryrdlock")));
GOSHIM_EXPORT int __pthread_rwlock_wrlock(pthread_rwlock_t*)
    __attribute__((alias("pthread_rwlock_wrlock")));
GOSHIM_EXPORT int __pthread_rwlock_trywrlock(pthread_rwlock_t*)
    __attribute__((alias("pthread_rwlock_trywrlock")));
GOSHIM_EXPORT int __pthread_rwlock_unlock(pthread_rwlock_t*)
    __attribute__((alias("pthread_rwlock_unlock")));
#pragma GCC diagnostic pop
