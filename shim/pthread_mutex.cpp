// pthread_mutex_*: glibc's memory layout, kinds and error codes, with
// waiting done by core/syncwait (goroutines park, foreign threads and code
// running before init block in the kernel, process-shared mutexes use the
// kernel futex on the lock word as a blocking call).
//
// The owner is the caller's THREAD_SELF->tid (tcb::self_tid): a unique
// virtual tid for a goroutine, the kernel tid for a foreign thread, so one
// mutex can be shared by both.
//
// Three lock-word protocols, as glibc has them:
//   simple (normal, recursive, errorcheck, adaptive):
//       0 unlocked, 1 locked, 2 locked and maybe waiters (Drepper's mutex).
//       Waiters wait for the word to leave 2; unlock wakes one if it was 2.
//   tid word (robust and/or priority-inherit):
//       owner tid | kWaiters | kOwnerDied. Robust mutexes sit on the
//       owner's robust list in its TCB, in glibc's format: the kernel walks
//       a foreign thread's list when it dies, goshim walks a goroutine's
//       (robust_exit below) when it exits; both mark the word kOwnerDied
//       and the next locker gets EOWNERDEAD. Priority inheritance (the
//       kernel's PI futex would see a virtual tid) is core/pi.hpp's: a
//       waiter of a PI mutex (private or process-shared) registers while
//       it waits, and the owner's M runs at the highest waiter's priority
//       until it unlocks (an owner of this process only).
//   priority protect: ceiling << 19 | the simple 0/1/2 state.
//       The ceiling is checked (EINVAL), and a real-time caller's kernel
//       priority raised to it, as glibc's tpp does (pp_change below).
//
// Process-shared mutexes use the same protocols as glibc, so they
// interoperate with other processes, native or under goshim. A private
// robust mutex does not carry glibc's pshared bit (glibc sets it on every
// robust mutex because the kernel wakes with a shared futex), so that
// goroutines park on it; when its owner is a foreign kernel thread, whose
// death only the kernel sees, waiters re-check the word every 20 ms.
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "arch/arch.hpp"
#include "core/fork.hpp"
#include "core/pi.hpp"
#include "core/proc.hpp"
#include "core/real.hpp"
#include "core/sched.hpp"
#include "core/scstore.hpp"
#include "core/sema.hpp"
#include "core/tcb.hpp"
#include "core/rtlock.hpp"
#include "shim/shim.hpp"
#include "shim/sync.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;
using namespace goshim::shim;

namespace {

constexpr int kInconsistent = INT_MAX;        // PTHREAD_MUTEX_INCONSISTENT
constexpr int kNotRecoverable = INT_MAX - 1;  // PTHREAD_MUTEX_NOTRECOVERABLE
constexpr int kWaiters = (int)0x80000000u;    // FUTEX_WAITERS
constexpr int kOwnerDied = 0x40000000;        // FUTEX_OWNER_DIED
constexpr int kTidMask = 0x3fffffff;          // FUTEX_TID_MASK
constexpr int kCeilShift = 19;                // PTHREAD_MUTEX_PRIO_CEILING_SHIFT
constexpr int kCeilMask = (int)0xfff80000u;   // PTHREAD_MUTEX_PRIO_CEILING_MASK
constexpr int kValidKindBits = kMutexKindMask | kMutexRobust | kMutexPI | kMutexPP |
                               kMutexPshared | kMutexElision | kMutexNoElision;
constexpr int64_t kForeignOwnerPollNs = 20 * 1000000;

// mutexattr encoding (pthreadP.h)
constexpr int kAttrProtocolShift = 28;
constexpr int kAttrProtocolMask = 0x30000000;
constexpr int kAttrCeilShift = 12;
constexpr int kAttrCeilMask = 0x00fff000;
constexpr int kAttrRobust = 0x40000000;
constexpr int kAttrPshared = (int)0x80000000u;
constexpr int kAttrFlagBits = kAttrRobust | kAttrPshared | kAttrProtocolMask | kAttrCeilMask;

// Plain fields are written by the owner only; other threads read them
// racily (owner checks), as glibc does. Relaxed atomics make that explicit.
inline int ld(const int* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline void st(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
inline bool cas(int* p, int* expect, int desired) {
  return __atomic_compare_exchange_n(p, expect, desired, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED);
}

const SyncDeadline kForever{};

// The id this caller records as the owner (see tcb::shared_tid).
inline int owner_id(int kind) {
  return (kind & kMutexPshared) ? tcb::shared_tid() : tcb::self_tid();
}

// ---- simple protocol -----------------------------------------------------

// Takes the lock word after a failed fast path (or, contended, right away
// with the "maybe waiters" state).
__attribute__((noinline)) int simple_acquire(MutexObj* m, int kind, const SyncDeadline* dl,
                                             bool contended) {
  bool shared = kind & kMutexPshared;
  if (!contended) {
    // Spin a little while the holder may be running elsewhere: always for
    // a goroutine (Go's mutex does), only for adaptive mutexes otherwise.
    bool adaptive = (kind & kMutexKindMask) == PTHREAD_MUTEX_ADAPTIVE_NP;
    if (can_park() || adaptive) {
      for (int i = 0; sync_can_spin(i, ld(&m->owner)) || (adaptive && !can_park() && i < 100);
           i++) {
        sync_pause(30);
        int z = 0;
        if (ld(&m->lock) == 0 && cas(&m->lock, &z, 1)) return 0;
      }
    }
  }
  const SyncDeadline& d = dl ? *dl : kForever;
  // A waiter takes a hand-over (simple_release): once its attempt has
  // waited kLockStarveNs, the owner leaving gives it the lock instead of
  // freeing the word, where the owner, spinning goroutines or a kernel
  // thread coming back first would take it again (barging). Woken and
  // beaten to the word, it waits again at the front of the queue. (A
  // process-shared mutex: only between goroutines of one process, see
  // sync_release_lock.)
  SemaLockWait lw{0, false};
  while (__atomic_exchange_n(&m->lock, 2, __ATOMIC_ACQUIRE) != 0) {
    if (d.abs && !valid_nsec(d.abs)) return EINVAL;  // checked only once it must block
    if (!lw.since)
      lw.since = sys::nanotime();
    else
      lw.front = true;
    int r = sync_wait(&m->lock, 2, d, WaitReason::Mutex, shared, ~0u, nullptr, false, &lw);
    if (r == kSemaHandoff) return 0;  // ours: the word stays 2 (locked, maybe waiters)
    if (r == ETIMEDOUT) return ETIMEDOUT;
  }
  return 0;
}

// After a hand-over to a goroutine (readied in this P's runnext): the
// caller of pthread_mutex_unlock lets it run now, as Go's Unlock does in
// starvation mode, rather than keep it waiting with the lock for the rest
// of its time slice.
__attribute__((noinline, cold)) void yield_to_new_owner() {
  if (can_park()) gosched_local();
}

// The lock word: 0 unlocked, 1 locked, 2 locked and maybe waiters (only the
// owner takes it from 2). Contended: sync_release_lock frees the word and
// wakes the first waiter, or hands the lock to it when it has waited too
// long; the word then stays 2, which every locker, glibc's code on a
// foreign thread or in another process included, reads as taken. yield:
// the caller is pthread_mutex_unlock (not a condition variable's wait).
inline void simple_release(MutexObj* m, int kind, bool yield) {
  if (ld(&m->lock) == 2) {
    if (sync_release_lock((uint32_t*)&m->lock, 2, 0, 1, kind & kMutexPshared) ==
            LockRelease::HandedToG &&
        yield)
      yield_to_new_owner();
    return;
  }
  if (__atomic_exchange_n(&m->lock, 0, __ATOMIC_RELEASE) > 1)
    sync_wake(&m->lock, 1, kind & kMutexPshared);
}

// ---- robust list (glibc's ENQUEUE_MUTEX / DEQUEUE_MUTEX) --------------------

struct ListNode {  // __pthread_list_t
  void* prev;
  void* next;
};
constexpr uintptr_t kQueuePtrAdjust = offsetof(ListNode, next);

void robust_enqueue(tcb::RobustHead* head, MutexObj* m) {
  ListNode* next = (ListNode*)(((uintptr_t)head->list & ~(uintptr_t)1) - kQueuePtrAdjust);
  next->prev = &m->next;
  m->next = head->list;
  m->prev = (void*)head;
  __asm__ volatile("" ::: "memory");  // the entry is complete before the kernel can see it
  head->list = &m->next;  // bit 0 clear: not a kernel PI futex, the kernel wakes waiters
}

void robust_dequeue(MutexObj* m) {
  ListNode* next = (ListNode*)(((uintptr_t)m->next & ~(uintptr_t)1) - kQueuePtrAdjust);
  next->prev = m->prev;
  ListNode* prev = (ListNode*)(((uintptr_t)m->prev & ~(uintptr_t)1) - kQueuePtrAdjust);
  prev->next = m->next;
  __asm__ volatile("" ::: "memory");
  m->prev = nullptr;
  m->next = nullptr;
}

inline void set_pending(tcb::RobustHead* head, void* entry) {
  if (!head) return;
  __asm__ volatile("" ::: "memory");
  head->list_op_pending = entry;
  __asm__ volatile("" ::: "memory");
}

// The deadline of one wait of a private robust mutex whose owner is a
// kernel thread: at most kForeignOwnerPollNs away, so its death (which only
// the kernel sees) is noticed.
struct PollDeadline {
  struct timespec ts;
  SyncDeadline dl;
  bool capped = false;
};

void poll_deadline(const SyncDeadline& user, PollDeadline* out,
                   int64_t slice = kForeignOwnerPollNs) {
  int64_t cap = sys::nanotime() + slice;
  int64_t u = user.abs ? deadline_from_abs(user.clk, user.abs) : 0;
  out->dl = user;
  if (u == 0 || u > cap) {
    out->ts.tv_sec = cap / 1000000000;
    out->ts.tv_nsec = cap % 1000000000;
    out->dl.clk = CLOCK_MONOTONIC;
    out->dl.abs = &out->ts;
    out->capped = true;
  }
}

// ---- tid-word protocol (robust and/or priority inherit) ---------------------

// tidword_lock_wait's answer when leave_on_cancel and a cancellation was
// requested while it waited (not an errno).
constexpr int kLeftForCancel = -1;

// piw: the caller's priority-inheritance record (core/pi.hpp), registered
// while it waits for a PI mutex (private or process-shared); the caller
// unregisters it. leave_on_cancel: the caller (a kernel thread in
// asynchronous cancellation mode) keeps SIGCANCEL blocked; once a
// cancellation is requested, the wait is left (kLeftForCancel) so that
// the caller can drop piw before the handler unwinds it.
__attribute__((noinline)) int tidword_lock_wait(MutexObj* m, int kind, const SyncDeadline* dl,
                                                LockMode mode, PiWaiter* piw,
                                                bool leave_on_cancel) {
  bool robust = kind & kMutexRobust;
  bool pi = kind & kMutexPI;
  bool shared = kind & kMutexPshared;
  int type = kind & kMutexKindMask;
  bool cond = mode == LockMode::CondRelock || mode == LockMode::CondContended;
  int id = owner_id(kind);
  tcb::RobustHead* head = robust ? tcb::self_robust() : nullptr;
  set_pending(head, &m->next);
  // Set once we may share kWaiters with other waiters, so that we keep it
  // when we take the lock (else a wake-up would be lost).
  int assume = cond ? kWaiters : 0;
  // A waiter takes a hand-over as simple_acquire's do (tidword_unlock):
  // the word then names it, flagged kWaiters, as after its own CAS.
  SemaLockWait lw{0, false, (uint32_t)(id | kWaiters)};
  int oldval = ld(&m->lock);
  for (;;) {
    if (oldval == 0) {
      if (cas(&m->lock, &oldval, id | assume)) break;
      continue;
    }
    if (robust && (oldval & kOwnerDied)) {
      int newval = id | (oldval & kWaiters) | assume;
      if (!cas(&m->lock, &oldval, newval)) continue;
      m->count = 1;
      st(&m->owner, kInconsistent);  // until pthread_mutex_consistent
      robust_enqueue(head, m);
      set_pending(head, nullptr);
      if (cond) m->nusers--;  // the dead owner's use becomes ours
      return EOWNERDEAD;
    }
    if ((oldval & kTidMask) == id) {
      if (type == PTHREAD_MUTEX_ERRORCHECK_NP) {
        set_pending(head, nullptr);
        return EDEADLK;
      }
      if (type == PTHREAD_MUTEX_RECURSIVE_NP) {
        set_pending(head, nullptr);
        if (m->count + 1 == 0) return EAGAIN;
        m->count++;
        return 0;
      }
      // normal/adaptive: deadlock, as glibc's (waits below forever)
    }
    if (mode == LockMode::Try) {
      set_pending(head, nullptr);
      return EBUSY;
    }
    if (!(oldval & kWaiters)) {
      if (!cas(&m->lock, &oldval, oldval | kWaiters)) continue;
      oldval |= kWaiters;
    }
    assume = kWaiters;
    const SyncDeadline& user = dl ? *dl : kForever;
    if (user.abs && !valid_nsec(user.abs)) {
      set_pending(head, nullptr);
      return EINVAL;
    }
    if (!lw.since)
      lw.since = sys::nanotime();
    else
      lw.front = true;
    int r;
    // A PI mutex: the waiter's priority goes to the owner (core/pi.hpp);
    // a waiter with one to give recomputes after every slice.
    if (pi && !piw->linked) pi_wait_begin(piw, &m->lock, shared);
    bool pi_timed = pi && pi_wait_timed(piw);
    if (pi_timed || (robust && !shared && !is_virtual_tid(oldval & kTidMask))) {
      PollDeadline pd;
      poll_deadline(user, &pd, pi_timed ? kPiRecheckNs : kForeignOwnerPollNs);
      r = sync_wait(&m->lock, (uint32_t)oldval, pd.dl, WaitReason::Mutex, shared, ~0u, nullptr,
                    false, &lw);
      if (r == ETIMEDOUT && pd.capped) {
        r = 0;
        if (pi_timed) pi_recompute_now(piw);
      }
    } else {
      r = sync_wait(&m->lock, (uint32_t)oldval, user, WaitReason::Mutex, shared, ~0u, nullptr,
                    false, &lw);
    }
    if (r == kSemaHandoff) break;  // ours: the word holds id | kWaiters
    if (r == ETIMEDOUT) {
      set_pending(head, nullptr);
      return ETIMEDOUT;
    }
    if (leave_on_cancel && tcb::self_cancel_requested()) {
      set_pending(head, nullptr);
      return kLeftForCancel;
    }
    oldval = ld(&m->lock);
  }
  // Acquired.
  if (robust && ld(&m->owner) == kNotRecoverable) {
    m->count = 0;
    if (__atomic_exchange_n(&m->lock, 0, __ATOMIC_RELEASE) & kWaiters)
      sync_wake(&m->lock, 1, shared);
    set_pending(head, nullptr);
    return ENOTRECOVERABLE;
  }
  m->count = 1;
  if (robust) {
    robust_enqueue(head, m);
    set_pending(head, nullptr);
  }
  st(&m->owner, id);
  if (!cond) m->nusers++;
  return 0;
}

// A kernel thread that is no goroutine (1:1 mode, a foreign thread) in
// asynchronous cancellation mode, locking a PI mutex: glibc's SIGCANCEL
// handler would unwind it wherever the signal lands, also while its
// PiWaiter (in this frame) is registered or pi_lock held. SIGCANCEL stays
// blocked from before the registration to after it is dropped (the waits
// inside end when a cancellation is requested: wait_foreign, syncwait's
// kernel_wait_pi_async); unblocking then lets the handler act, as it
// would have in the wait. (A goroutine's handler never unwinds goshim's
// frames: core/preempt.cpp async_cancel_safe.)
__attribute__((noinline)) int tidword_lock_guarded(MutexObj* m, int kind, const SyncDeadline* dl,
                                                   LockMode mode) {
  const uint64_t block = 1ull << (32 - 1);  // glibc's SIGCANCEL
  for (;;) {
    uint64_t old = 0;
    sys::rt_sigprocmask(SIG_BLOCK, &block, &old, 8);
    bool opened = !(old & block);  // else nothing can unwind this thread here
    PiWaiter piw;
    int r = tidword_lock_wait(m, kind, dl, mode, &piw, opened);
    if (piw.linked) pi_wait_end(&piw);
    if (opened) sys::rt_sigprocmask(SIG_SETMASK, &old, nullptr, 8);
    if (r != kLeftForCancel) return r;
    // The handler did not act (cancellation disabled meanwhile): again.
  }
}

int tidword_lock(MutexObj* m, int kind, const SyncDeadline* dl, LockMode mode) {
  if (__builtin_expect((kind & kMutexPI) && mode != LockMode::Try, 0)) {
    G* g = tls_g;
    if (!(g && !g->is_g0()) && tcb::self_async_cancel()) {
      // Nothing is registered (and nothing to guard) unless it waits: a
      // free mutex (or an answer without waiting: EDEADLK, a recursive
      // count, EOWNERDEAD) as a trylock would take it, which is what a
      // lock does up to its first wait; only EBUSY goes on to the guarded
      // wait (two rt_sigprocmask calls).
      if (mode == LockMode::Lock) {
        PiWaiter piw;
        int r = tidword_lock_wait(m, kind, dl, LockMode::Try, &piw, false);
        if (r != EBUSY) return r;
      }
      return tidword_lock_guarded(m, kind, dl, mode);
    }
  }
  PiWaiter piw;
  int r = tidword_lock_wait(m, kind, dl, mode, &piw, false);
  if (__builtin_expect(piw.linked, 0)) pi_wait_end(&piw);
  return r;
}

__attribute__((noinline)) int tidword_unlock(MutexObj* m, int kind, bool decr) {
  bool robust = kind & kMutexRobust;
  bool shared = kind & kMutexPshared;
  int type = kind & kMutexKindMask;
  int id = owner_id(kind);
  int newowner = 0;
  int lockval = ld(&m->lock);
  if (type == PTHREAD_MUTEX_RECURSIVE_NP) {
    if (robust && (lockval & kTidMask) == id && ld(&m->owner) == kInconsistent) {
      if (--m->count != 0) return ENOTRECOVERABLE;
      newowner = kNotRecoverable;
    } else {
      if (ld(&m->owner) != id) return EPERM;
      if (--m->count != 0) return 0;
    }
  } else {
    if ((lockval & kTidMask) != id || lockval == 0) return EPERM;
    // A dead owner's state was not repaired: nobody can use it any more.
    if (robust && ld(&m->owner) == kInconsistent) newowner = kNotRecoverable;
  }
  tcb::RobustHead* head = robust ? tcb::self_robust() : nullptr;
  if (robust) {
    set_pending(head, &m->next);
    robust_dequeue(m);
  }
  st(&m->owner, newowner);
  if (decr) m->nusers--;
  // The exchange (or the hand-over) is the last access to the mutex (it
  // may be destroyed right after); the wake uses its address only.
  // With waiters, a waiter that has waited kLockStarveNs is handed the
  // lock (sync_release_lock stores its id | kWaiters), as for the simple
  // protocol; not a mutex made unrecoverable (every waiter must see it).
  LockRelease rel = LockRelease::Freed;
  if (ld(&m->lock) == (id | kWaiters) && newowner != kNotRecoverable) {
    rel = sync_release_lock((uint32_t*)&m->lock, (uint32_t)(id | kWaiters), 0,
                            (uint32_t)INT_MAX, shared);
  } else if (__atomic_exchange_n(&m->lock, 0, __ATOMIC_RELEASE) & kWaiters) {
    sync_wake(&m->lock, 1, shared);
  }
  set_pending(head, nullptr);
  // Its inherited priority ends here, and a new owner inherits from the
  // waiters left (core/pi.hpp).
  // A boosted owner woken here onto a run queue: this M has its priority
  // now and runs it next, as after a hand-over.
  if ((kind & kMutexPI) && pi_after_unlock(true) && decr)
    rel = LockRelease::HandedToG;
  if (rel == LockRelease::HandedToG && decr) yield_to_new_owner();
  return 0;
}

// ---- priority protect -------------------------------------------------------

// A kernel thread's priority-protect record (glibc's struct
// priority_protection_data): how many of the mutexes it holds have each
// ceiling, and the highest. Static TLS: at the same offset from every
// thread pointer, so pthread_setschedparam finds the target's.
struct ForeignTpp {
  int priomax;  // 0: none held (SCHED_FIFO priorities start at 1)
  pid_t tid;    // its kernel tid, once it held one
  // Ceilings held and how many mutexes of each (distinct ceilings held at
  // once beyond the slots: EAGAIN, as goshim's goroutines have).
  uint8_t ceil[8];
  uint32_t count[8];
};
__thread ForeignTpp foreign_tpp __attribute__((tls_model("initial-exec")));

// The goroutine whose priority protection a PP mutex call changes: the
// caller, M:N or bound to its M (core/rtlock.hpp). nullptr for a foreign
// thread (its kernel priority is not raised).
G* pp_self() {
  G* g = tls_g;
  if (g && !g->is_g0() && g->rt_locked && mn_active()) return g;
  return shim::user_g();
}

// The caller's scheduling priority, as __pthread_current_priority gives it:
// a kernel thread's own (glibc's record, pthread_getschedparam), not the
// one its priority-protect mutexes raised it to.
int current_priority() {
  if (G* gp = pp_self()) return gp->sched_priority;
  int policy;
  struct sched_param sp;
  if (real::pthread_getschedparam(pthread_self(), &policy, &sp) != 0) return 0;
  return sp.sched_priority;
}

// glibc's __pthread_tpp_change_priority for a kernel thread that is not a
// goroutine (every thread in 1:1 mode), on goshim's record of the ceilings
// it holds (ForeignTpp): its kernel priority is raised to the highest, and
// restored, with sched_setscheduler on its own policy, as glibc does.
int foreign_pp_change(int previous, int next) {
  ForeignTpp& t = foreign_tpp;
  constexpr int kN = sizeof t.ceil / sizeof t.ceil[0];
  int priomax = t.priomax, newmax = priomax;
  if (next != -1) {
    int slot = -1;
    for (int i = 0; i < kN; i++) {
      if (t.count[i] && t.ceil[i] == next) {
        slot = i;
        break;
      }
      if (!t.count[i] && slot < 0) slot = i;
    }
    if (slot < 0 || t.count[slot] + 1 == 0) return EAGAIN;
    t.ceil[slot] = (uint8_t)next;
    t.count[slot]++;
    if (next > priomax) newmax = next;
  }
  if (previous != -1) {
    for (int i = 0; i < kN; i++) {
      if (!t.count[i] || t.ceil[i] != previous) continue;
      if (--t.count[i] == 0 && priomax == previous && previous > next) {
        newmax = 0;
        for (int j = 0; j < kN; j++)
          if (t.count[j] && t.ceil[j] > newmax) newmax = t.ceil[j];
      }
      break;
    }
  }
  if (newmax == priomax) return 0;
  if (!t.tid) t.tid = (pid_t)sys::gettid();
  __atomic_store_n(&t.priomax, newmax, __ATOMIC_RELEASE);
  // The thread's own policy and priority, as glibc records them (read
  // once and kept by glibc, so that a raise is never taken for its own).
  int policy;
  struct sched_param sp;
  int r = real::pthread_getschedparam(pthread_self(), &policy, &sp);
  if (r) return r;
  if (sp.sched_priority < newmax || sp.sched_priority < priomax) {
    if (sp.sched_priority < newmax) sp.sched_priority = newmax;
    long e = sys::sched_setscheduler(0, policy, &sp);
    if (e < 0) return (int)-e;
  }
  return 0;
}

// glibc's __pthread_tpp_change_priority for the caller.
int pp_change(int previous, int next) {
  G* gp = pp_self();
  return gp ? rt_pp_change(gp, previous, next) : foreign_pp_change(previous, next);
}

__attribute__((noinline)) int pp_lock(MutexObj* m, int kind, const SyncDeadline* dl,
                                      LockMode mode) {
  bool shared = kind & kMutexPshared;
  int type = kind & kMutexKindMask;
  bool cond = mode == LockMode::CondRelock || mode == LockMode::CondContended;
  int id = owner_id(kind);
  if (ld(&m->owner) == id) {
    if (type == PTHREAD_MUTEX_ERRORCHECK_NP) return EDEADLK;
    if (type == PTHREAD_MUTEX_RECURSIVE_NP) {
      if (m->count + 1 == 0) return EAGAIN;
      m->count++;
      return 0;
    }
  }
  int state = cond ? 2 : 1;  // the low bits we store when we take it
  int oldprio = -1;          // the ceiling counted for the caller (glibc's tpp)
  for (;;) {
    int cur = ld(&m->lock);
    int ceiling = (int)((unsigned)(cur & kCeilMask) >> kCeilShift);
    if (current_priority() > ceiling) {
      if (oldprio != -1) pp_change(oldprio, -1);
      return EINVAL;
    }
    int r = pp_change(oldprio, ceiling);  // raised before the lock is taken
    if (r) return r;
    oldprio = ceiling;
    int ceilval = ceiling << kCeilShift;
    if ((cur & ~kCeilMask) == 0) {
      if (cas(&m->lock, &cur, ceilval | state)) break;
      continue;
    }
    if (mode == LockMode::Try) {
      pp_change(oldprio, -1);
      return EBUSY;
    }
    if ((cur & ~kCeilMask) == 1 && !cas(&m->lock, &cur, ceilval | 2)) continue;
    const SyncDeadline& user = dl ? *dl : kForever;
    if (user.abs && !valid_nsec(user.abs)) {
      pp_change(oldprio, -1);
      return EINVAL;
    }
    r = sync_wait(&m->lock, (uint32_t)(ceilval | 2), user, WaitReason::Mutex, shared);
    if (r == ETIMEDOUT) {
      pp_change(oldprio, -1);
      return ETIMEDOUT;
    }
    state = 2;
  }
  m->count = 1;
  st(&m->owner, id);
  if (!cond) m->nusers++;
  return 0;
}

__attribute__((noinline)) int pp_unlock(MutexObj* m, int kind, bool decr) {
  int type = kind & kMutexKindMask;
  int id = owner_id(kind);
  if (type == PTHREAD_MUTEX_RECURSIVE_NP) {
    if (ld(&m->owner) != id) return EPERM;
    if (--m->count != 0) return 0;
  } else if (type == PTHREAD_MUTEX_ERRORCHECK_NP) {
    if (ld(&m->owner) != id || (ld(&m->lock) & ~kCeilMask) == 0) return EPERM;
  }
  st(&m->owner, 0);
  if (decr) m->nusers--;
  int old = ld(&m->lock);
  while (!__atomic_compare_exchange_n(&m->lock, &old, old & kCeilMask, true, __ATOMIC_RELEASE,
                                      __ATOMIC_RELAXED)) {
  }
  if ((old & ~kCeilMask) > 1) sync_wake(&m->lock, 1, kind & kMutexPshared);
  return pp_change((int)((unsigned)(old & kCeilMask) >> kCeilShift), -1);
}

// ---- robust owner death at goroutine exit ---------------------------------------

// What the kernel's handle_futex_death does for a dead thread's entry.
// vtid: the dead goroutine's; the word holds its shared id if pshared.
void owner_died(int* lock, int vtid) {
  MutexObj* mo = (MutexObj*)lock;
  int id = (ld(&mo->kind) & kMutexPshared) ? tcb::shared_tid_of(vtid) : vtid;
  int uval = ld(lock);
  for (;;) {
    if ((uval & kTidMask) != id) return;
    int nval = (uval & kWaiters) | kOwnerDied;
    if (__atomic_compare_exchange_n(lock, &uval, nval, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
      break;
  }
  if (uval & kWaiters) {
    MutexObj* m = (MutexObj*)lock;
    sync_wake(lock, 1, ld(&m->kind) & kMutexPshared);
  }
}

// G-exit hook: the dead goroutine's robust mutexes become EOWNERDEAD for
// their next locker, as a dead kernel thread's would.
void robust_exit(G* gp) {
  tcb::RobustHead* head = tcb::robust_of(gp->tp);
  if (!head) return;
  int id = gp->vtid;
  void* pending = head->list_op_pending;
  uintptr_t e = (uintptr_t)head->list & ~(uintptr_t)1;
  for (int n = 0; e != (uintptr_t)head && e != 0 && n < 2048; n++) {  // ROBUST_LIST_LIMIT
    uintptr_t next = (uintptr_t)*(void**)e;
    if ((void*)e != pending) owner_died((int*)(e + head->futex_offset), id);
    e = next & ~(uintptr_t)1;
  }
  if (pending) owner_died((int*)(((uintptr_t)pending & ~(uintptr_t)1) + head->futex_offset), id);
  head->list = head;
  head->list_op_pending = nullptr;
}

__attribute__((constructor(102))) void mutex_ctor() {
  tcb::early_init();
  add_g_exit_hook(robust_exit);
  register_fork_child_hook(tcb::reset_shared_offset);  // a new pid, a new offset (fork, _Fork)
}

inline int fifo_min_prio() { return sched_get_priority_min(SCHED_FIFO); }
inline int fifo_max_prio() { return sched_get_priority_max(SCHED_FIFO); }

}  // namespace

// ---- internals for pthread_cond.cpp ------------------------------------------------

namespace goshim::shim {

int foreign_pp_max(pthread_t t, pid_t* tid) {
  auto* f = (ForeignTpp*)((uintptr_t)t + ((uintptr_t)&foreign_tpp - arch::get_tp()));
  int m = __atomic_load_n(&f->priomax, __ATOMIC_ACQUIRE);
  *tid = f->tid;
  return m;
}

int mutex_lock_impl(MutexObj* m, const SyncDeadline* dl, LockMode mode) {
  int kind = ld(&m->kind);
  if (kind & ~kValidKindBits) return EINVAL;  // destroyed (-1) or garbage
  if (kind & (kMutexRobust | kMutexPI)) return tidword_lock(m, kind, dl, mode);
  if (kind & kMutexPP) return pp_lock(m, kind, dl, mode);
  int type = kind & kMutexKindMask;
  int id = owner_id(kind);
  if (type == PTHREAD_MUTEX_RECURSIVE_NP || type == PTHREAD_MUTEX_ERRORCHECK_NP) {
    if (ld(&m->owner) == id) {
      if (type == PTHREAD_MUTEX_ERRORCHECK_NP) return mode == LockMode::Try ? EBUSY : EDEADLK;
      if (m->count + 1 == 0) return EAGAIN;
      m->count++;
      return 0;
    }
  }
  int z = 0;
  if (mode == LockMode::CondContended) {
    int r = simple_acquire(m, kind, dl, true);
    if (r) return r;
  } else if (!cas(&m->lock, &z, 1)) {
    if (mode == LockMode::Try) return EBUSY;
    int r = simple_acquire(m, kind, dl, false);
    if (r) return r;
  }
  if (type == PTHREAD_MUTEX_RECURSIVE_NP) m->count = 1;
  st(&m->owner, id);
  if (mode == LockMode::Lock || mode == LockMode::Try) m->nusers++;
  return 0;
}

int mutex_unlock_impl(MutexObj* m, bool decr) {
  int kind = ld(&m->kind);
  if (kind & ~kValidKindBits) return EINVAL;
  if (kind & (kMutexRobust | kMutexPI)) return tidword_unlock(m, kind, decr);
  if (kind & kMutexPP) return pp_unlock(m, kind, decr);
  int type = kind & kMutexKindMask;
  if (type == PTHREAD_MUTEX_RECURSIVE_NP) {
    if (ld(&m->owner) != owner_id(kind)) return EPERM;
    if (--m->count != 0) return 0;
  } else if (type == PTHREAD_MUTEX_ERRORCHECK_NP) {
    if (ld(&m->owner) != owner_id(kind) || ld(&m->lock) == 0) return EPERM;
  }
  st(&m->owner, 0);
  if (decr) m->nusers--;
  simple_release(m, kind, decr);
  return 0;
}

int* mutex_requeue_word(MutexObj* m) {
  int kind = ld(&m->kind);
  if (kind & ~(kMutexKindMask | kMutexElision | kMutexNoElision)) return nullptr;
  return &m->lock;
}

void mutex_after_requeue(MutexObj* m) {
  // Requeued waiters sleep on the lock word without having marked it: make
  // sure the next unlock wakes one (1 -> 2), or wake one now if unlocked;
  // a woken waiter re-locks with the contended state, so the chain goes on.
  int v = ld(&m->lock);
  for (;;) {
    if (v == 0) {
      sync_wake(&m->lock, 1, false);
      return;
    }
    if (v == 2) return;
    if (__atomic_compare_exchange_n(&m->lock, &v, 2, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      return;
  }
}

}  // namespace goshim::shim

// ---- pthread_mutex_* ------------------------------------------------------------------

GOSHIM_EXPORT int pthread_mutex_init(pthread_mutex_t* mu, const pthread_mutexattr_t* attr) {
  int a = attr ? *(const int*)attr : PTHREAD_MUTEX_NORMAL;
  int protocol = (a & kAttrProtocolMask) >> kAttrProtocolShift;
  if (protocol != PTHREAD_PRIO_NONE && protocol != PTHREAD_PRIO_INHERIT && (a & kAttrRobust))
    return ENOTSUP;  // robust priority-protect mutexes: not supported, as in glibc
  MutexObj* m = (MutexObj*)mu;
  memset(m, 0, sizeof *m);
  int kind = a & ~kAttrFlagBits;
  if (a & kAttrRobust) kind |= kMutexRobust;
  if (protocol == PTHREAD_PRIO_INHERIT) {
    kind |= kMutexPI;
  } else if (protocol == PTHREAD_PRIO_PROTECT) {
    kind |= kMutexPP;
    int ceiling = (a & kAttrCeilMask) >> kAttrCeilShift;
    if (ceiling < fifo_min_prio()) ceiling = fifo_min_prio();
    m->lock = ceiling << kCeilShift;
  }
  if (a & kAttrPshared) kind |= kMutexPshared;
  __atomic_store_n(&m->kind, kind, __ATOMIC_RELAXED);
  return 0;
}

GOSHIM_EXPORT int pthread_mutex_destroy(pthread_mutex_t* mu) {
  MutexObj* m = (MutexObj*)mu;
  if (!(ld(&m->kind) & kMutexRobust) && m->nusers != 0) return EBUSY;
  st(&m->kind, -1);
  return 0;
}

namespace {
// The end of the fast path before tcb::early_init ran (tail-called, so
// that the fast path itself needs no stack frame).
__attribute__((noinline, cold)) int finish_lock_early(MutexObj* m) {
  st(&m->owner, tcb::slow_tid());
  m->nusers++;
  return 0;
}
}  // namespace

// The uncontended cases (a normal private mutex) inline; the rest in
// mutex_lock_impl / mutex_unlock_impl.
GOSHIM_EXPORT int pthread_mutex_lock(pthread_mutex_t* mu) {
  MutexObj* m = (MutexObj*)mu;
  int kind = ld(&m->kind);
  if (__builtin_expect((kind & ~kMutexNoElision) == 0, 1)) {
    int z = 0;
    if (__builtin_expect(cas(&m->lock, &z, 1), 1)) {
      size_t off = tcb::tid_off.load(std::memory_order_relaxed);
      if (__builtin_expect(off == 0, 0)) return finish_lock_early(m);
      pid_t tid;
#if defined(__x86_64__)
      __asm__("movl %%fs:(%1), %0" : "=r"(tid) : "r"(off));  // THREAD_SELF->tid
#else
      tid = *(const pid_t*)(tcb::self() + off);
#endif
      st(&m->owner, tid);
      m->nusers++;
      return 0;
    }
  }
  return mutex_lock_impl(m, nullptr, LockMode::Lock);
}

GOSHIM_EXPORT int pthread_mutex_unlock(pthread_mutex_t* mu) {
  MutexObj* m = (MutexObj*)mu;
  int kind = ld(&m->kind);
  if (__builtin_expect((kind & ~kMutexNoElision) == 0, 1)) {
    st(&m->owner, 0);
    m->nusers--;
    simple_release(m, kind, true);
    shim::preempt_check();
    return 0;
  }
  int r = mutex_unlock_impl(m, true);
  shim::preempt_check();
  return r;
}

GOSHIM_EXPORT int pthread_mutex_trylock(pthread_mutex_t* mu) {
  int r = mutex_lock_impl((MutexObj*)mu, nullptr, LockMode::Try);
  if (r == EBUSY) shim::preempt_check();
  return r;
}

GOSHIM_EXPORT int pthread_mutex_timedlock(pthread_mutex_t* mu, const struct timespec* abstime) {
  SyncDeadline dl{CLOCK_REALTIME, abstime};
  return mutex_lock_impl((MutexObj*)mu, &dl, LockMode::Lock);
}

GOSHIM_EXPORT int pthread_mutex_clocklock(pthread_mutex_t* mu, clockid_t clk,
                                          const struct timespec* abstime) {
  if (!valid_clock(clk)) return EINVAL;
  SyncDeadline dl{clk, abstime};
  return mutex_lock_impl((MutexObj*)mu, &dl, LockMode::Lock);
}

GOSHIM_EXPORT int pthread_mutex_consistent(pthread_mutex_t* mu) {
  MutexObj* m = (MutexObj*)mu;
  if (!(ld(&m->kind) & kMutexRobust) || ld(&m->owner) != kInconsistent) return EINVAL;
  st(&m->owner, owner_id(ld(&m->kind)));
  return 0;
}

// Old names (compat symbols of glibc; <pthread.h> maps them to the new ones).
GOSHIM_EXPORT int goshim_mutex_consistent_np(pthread_mutex_t*) __asm__("pthread_mutex_consistent_np");
int goshim_mutex_consistent_np(pthread_mutex_t* mu) { return pthread_mutex_consistent(mu); }

GOSHIM_EXPORT int pthread_mutex_getprioceiling(const pthread_mutex_t* mu, int* prioceiling) {
  const MutexObj* m = (const MutexObj*)mu;
  if (!(ld(&m->kind) & kMutexPP)) return EINVAL;
  *prioceiling = (int)((unsigned)(ld(&m->lock) & kCeilMask) >> kCeilShift);
  return 0;
}

GOSHIM_EXPORT int pthread_mutex_setprioceiling(pthread_mutex_t* mu, int prioceiling,
                                               int* old_ceiling) {
  MutexObj* m = (MutexObj*)mu;
  int kind = ld(&m->kind);
  if (!(kind & kMutexPP)) return EINVAL;
  if (prioceiling < fifo_min_prio() || prioceiling > fifo_max_prio() ||
      (prioceiling & (kAttrCeilMask >> kAttrCeilShift)) != prioceiling)
    return EINVAL;
  bool shared = kind & kMutexPshared;
  int type = kind & kMutexKindMask;
  bool locked = false;
  if (ld(&m->owner) == owner_id(kind)) {
    if (type == PTHREAD_MUTEX_ERRORCHECK_NP) return EDEADLK;
    if (type == PTHREAD_MUTEX_RECURSIVE_NP) locked = true;
  }
  int oldval = ld(&m->lock);
  if (!locked) {
    // Take the lock word, without the priority protection protocol.
    int state = 1;
    for (;;) {
      int ceilval = oldval & kCeilMask;
      int cur = ceilval;
      if (cas(&m->lock, &cur, ceilval | state)) break;
      if ((cur & kCeilMask) != ceilval) {
        oldval = cur;
        continue;
      }
      if ((cur & ~kCeilMask) == 1 && !cas(&m->lock, &cur, ceilval | 2)) {
        oldval = cur;
        continue;
      }
      sync_wait(&m->lock, (uint32_t)(ceilval | 2), kForever, WaitReason::Mutex, shared);
      state = 2;
      oldval = ld(&m->lock);
    }
  }
  int oldprio = (int)((unsigned)(oldval & kCeilMask) >> kCeilShift);
  int* volatile out = old_ceiling;  // declared nonnull, but glibc accepts NULL
  if (out) *out = oldprio;
  int newlock = locked ? (ld(&m->lock) & ~kCeilMask) : 0;
  sc_store(&m->lock, newlock | (prioceiling << kCeilShift));
  sync_wake(&m->lock, INT_MAX, shared);
  return 0;
}

// ---- pthread_mutexattr_* (glibc's encoding: kind | flags in one int) -----------------

GOSHIM_EXPORT int pthread_mutexattr_init(pthread_mutexattr_t* attr) {
  memset(attr, 0, sizeof *attr);
  *(int*)attr = PTHREAD_MUTEX_NORMAL;
  return 0;
}

GOSHIM_EXPORT int pthread_mutexattr_destroy(pthread_mutexattr_t*) { return 0; }

GOSHIM_EXPORT int pthread_mutexattr_settype(pthread_mutexattr_t* attr, int kind) {
  if (kind < PTHREAD_MUTEX_NORMAL || kind > PTHREAD_MUTEX_ADAPTIVE_NP) return EINVAL;
  if (kind == PTHREAD_MUTEX_NORMAL) kind |= kMutexNoElision;  // as glibc: settype disables elision
  int* v = (int*)attr;
  *v = (*v & kAttrFlagBits) | kind;
  return 0;
}

GOSHIM_EXPORT int goshim_mutexattr_setkind_np(pthread_mutexattr_t*, int) __asm__(
    "pthread_mutexattr_setkind_np");
int goshim_mutexattr_setkind_np(pthread_mutexattr_t* attr, int kind) {
  return pthread_mutexattr_settype(attr, kind);
}

GOSHIM_EXPORT int pthread_mutexattr_gettype(const pthread_mutexattr_t* attr, int* kind) {
  *kind = *(const int*)attr & ~kAttrFlagBits & ~kMutexNoElision;
  return 0;
}

GOSHIM_EXPORT int goshim_mutexattr_getkind_np(const pthread_mutexattr_t*, int*) __asm__(
    "pthread_mutexattr_getkind_np");
int goshim_mutexattr_getkind_np(const pthread_mutexattr_t* attr, int* kind) {
  return pthread_mutexattr_gettype(attr, kind);
}

GOSHIM_EXPORT int pthread_mutexattr_getpshared(const pthread_mutexattr_t* attr, int* pshared) {
  *pshared = (*(const int*)attr & kAttrPshared) ? PTHREAD_PROCESS_SHARED
                                                 : PTHREAD_PROCESS_PRIVATE;
  return 0;
}

GOSHIM_EXPORT int pthread_mutexattr_setpshared(pthread_mutexattr_t* attr, int pshared) {
  if (pshared != PTHREAD_PROCESS_PRIVATE && pshared != PTHREAD_PROCESS_SHARED) return EINVAL;
  int* v = (int*)attr;
  if (pshared == PTHREAD_PROCESS_PRIVATE)
    *v &= ~kAttrPshared;
  else
    *v |= kAttrPshared;
  return 0;
}

GOSHIM_EXPORT int pthread_mutexattr_getrobust(const pthread_mutexattr_t* attr, int* robust) {
  *robust = (*(const int*)attr & kAttrRobust) ? PTHREAD_MUTEX_ROBUST : PTHREAD_MUTEX_STALLED;
  return 0;
}

GOSHIM_EXPORT int goshim_mutexattr_getrobust_np(const pthread_mutexattr_t*, int*) __asm__(
    "pthread_mutexattr_getrobust_np");
int goshim_mutexattr_getrobust_np(const pthread_mutexattr_t* attr, int* robust) {
  return pthread_mutexattr_getrobust(attr, robust);
}

GOSHIM_EXPORT int pthread_mutexattr_setrobust(pthread_mutexattr_t* attr, int robust) {
  if (robust != PTHREAD_MUTEX_STALLED && robust != PTHREAD_MUTEX_ROBUST) return EINVAL;
  int* v = (int*)attr;
  if (robust == PTHREAD_MUTEX_STALLED)
    *v &= ~kAttrRobust;
  else
    *v |= kAttrRobust;
  return 0;
}

GOSHIM_EXPORT int goshim_mutexattr_setrobust_np(pthread_mutexattr_t*, int) __asm__(
    "pthread_mutexattr_setrobust_np");
int goshim_mutexattr_setrobust_np(pthread_mutexattr_t* attr, int robust) {
  return pthread_mutexattr_setrobust(attr, robust);
}

GOSHIM_EXPORT int pthread_mutexattr_getprotocol(const pthread_mutexattr_t* attr, int* protocol) {
  *protocol = (*(const int*)attr & kAttrProtocolMask) >> kAttrProtocolShift;
  return 0;
}

GOSHIM_EXPORT int pthread_mutexattr_setprotocol(pthread_mutexattr_t* attr, int protocol) {
  if (protocol != PTHREAD_PRIO_NONE && protocol != PTHREAD_PRIO_INHERIT &&
      protocol != PTHREAD_PRIO_PROTECT)
    return EINVAL;
  int* v = (int*)attr;
  *v = (*v & ~kAttrProtocolMask) | (protocol << kAttrProtocolShift);
  return 0;
}

GOSHIM_EXPORT int pthread_mutexattr_getprioceiling(const pthread_mutexattr_t* attr,
                                                   int* prioceiling) {
  int ceiling = (*(const int*)attr & kAttrCeilMask) >> kAttrCeilShift;
  if (!ceiling && ceiling < fifo_min_prio()) ceiling = fifo_min_prio();
  *prioceiling = ceiling;
  return 0;
}

GOSHIM_EXPORT int pthread_mutexattr_setprioceiling(pthread_mutexattr_t* attr, int prioceiling) {
  if (prioceiling < fifo_min_prio() || prioceiling > fifo_max_prio() ||
      (prioceiling & (kAttrCeilMask >> kAttrCeilShift)) != prioceiling)
    return EINVAL;
  int* v = (int*)attr;
  *v = (*v & ~kAttrCeilMask) | (prioceiling << kAttrCeilShift);
  return 0;
}

// ---- glibc's old __pthread_* names (still exported, GLIBC_2.2.5) ------------------
// Binaries linked against them must reach the same implementation, or a
// mutex would be driven by two protocols at once.
#pragma GCC diagnostic push
#ifndef __clang__  // gcc only: clang has no -Wmissing-attributes
#pragma GCC diagnostic ignored "-Wmissing-attributes"  // same function, fewer declared attributes
#endif
GOSHIM_EXPORT int __pthread_mutex_init(pthread_mutex_t*, const pthread_mutexattr_t*)
    __attribute__((alias("pthread_mutex_init")));
GOSHIM_EXPORT int __pthread_mutex_destroy(pthread_mutex_t*)
    __attribute__((alias("pthread_mutex_destroy")));
GOSHIM_EXPORT int __pthread_mutex_lock(pthread_mutex_t*) __attribute__((alias("pthread_mutex_lock")));
GOSHIM_EXPORT int __pthread_mutex_trylock(pthread_mutex_t*)
    __attribute__((alias("pthread_mutex_trylock")));
GOSHIM_EXPORT int __pthread_mutex_unlock(pthread_mutex_t*)
    __attribute__((alias("pthread_mutex_unlock")));
GOSHIM_EXPORT int __pthread_mutexattr_init(pthread_mutexattr_t*)
    __attribute__((alias("pthread_mutexattr_init")));
GOSHIM_EXPORT int __pthread_mutexattr_destroy(pthread_mutexattr_t*)
    __attribute__((alias("pthread_mutexattr_destroy")));
GOSHIM_EXPORT int __pthread_mutexattr_settype(pthread_mutexattr_t*, int)
    __attribute__((alias("pthread_mutexattr_settype")));
#pragma GCC diagnostic pop
