// Priority inheritance for PTHREAD_PRIO_INHERIT mutexes (the kernel's
// rt-mutex semantics, Documentation/locking/rt-mutex.rst): while a thread
// of real-time priority P waits for such a mutex, its owner runs at P or
// above until it unlocks, through a chain of such mutexes too.
//
// goshim's PI mutexes are tid-word mutexes whose owner is a virtual tid
// (shim/pthread_mutex.cpp), so the kernel's PI futex cannot do it. Here:
//
//  - Every waiter of a contended PI mutex, private or process-shared (a
//    real-time G bound to its M, a kernel thread that is no goroutine, an
//    M:N goroutine) registers a PiWaiter (the word, itself, its own
//    priority) for the time it waits.
//  - pi_lock guards the records, and recomputation finds each record's
//    owner (the word's virtual tid, g_from_vtid; a process-shared word's
//    shared id turned back into it, tcb::tid_of_shared) and gives every goroutine
//    the highest priority among the waiters of the mutexes it owns, a
//    waiter counting with what it inherits itself (chains): G::pi_boost.
//    Only when some waiter has a real-time priority (or something is still
//    raised) does it do any of this.
//  - It then walks every M: an M running a G gets that G's boost (0: its
//    own scheduling), an M without a G (in its scheduler loop, asleep, not
//    started yet) the highest boost of a G on a run queue, since as a
//    SCHED_OTHER thread beside a real-time one it may never get the CPU to
//    take it. Raised: SCHED_FIFO at the boost, on its kernel tid
//    (sched_setscheduler; a bound real-time G: its own policy at the higher
//    of its priority and the boost); M::pi_prio records what was applied.
//  - The scheduler (execute, park's direct switch) compares the incoming
//    G's pi_boost with its M's pi_prio and sets its own kernel thread when
//    they differ: a boosted G carries its boost to whichever M runs it,
//    and an M that ran a boosted G drops it for the next G. An M about to
//    sleep drops it too (pi_m_idle).
//  - An unlock of a PI mutex recomputes (the old owner loses its boost;
//    the new one, if waiters remain, gets it); the unlocking goroutine's M
//    keeps the boost of an owner it woke onto its run queue and yields to
//    it, as for a hand-over. A waiter recomputes when it leaves (lock
//    taken, timeout).
//  - The scheduler side reads without pi_lock (no cost but a compare on
//    every switch), so an M can be raised just as it starts another G, or
//    a G moving between Ms can be missed; a waiter with a priority (or a
//    boost) waits in slices of kPiRecheckNs and recomputes after each,
//    which repairs both, and the last one to leave recomputes once more.
//
// An owner that is a kernel thread of this process but no goroutine (every
// thread in 1:1 mode, a thread started before goshim's, glibc's helper
// threads) is raised on its own tid; its own scheduling, read when it is
// first raised, is given back (a change of its own policy meanwhile is
// overwritten then). Any number of them at once (a growable table).
//
// A process-shared PI mutex raises its owner the same way when the owner
// is a goroutine or a kernel thread of this process (a kernel tid is
// checked with tgkill(getpid(), tid, 0)). An owner in another process is
// raised by nobody (its process would have to do it; a shared id decodes
// here to a virtual tid that is almost surely no live goroutine, the same
// 1 in 2^30 as shared ids colliding, LD_PRELOAD.md 7.10): the waiter still
// gets the mutex when that owner unlocks.
//
// Not done: a boosted G queued behind another G that computes on its P
// waits for that G to switch.
#pragma once

#include <sched.h>
#include <stdint.h>
#include <sys/types.h>

#include <atomic>

#include "core/gmp.hpp"

namespace goshim {

inline constexpr int64_t kPiRecheckNs = 5 * 1000 * 1000;

struct PiWaiter {
  PiWaiter* next = nullptr;
  const int* word = nullptr;  // the mutex's lock word: owner tid | flags
  G* g = nullptr;             // the waiting goroutine, or nullptr (a kernel thread)
  G* owner = nullptr;         // pi_recompute's scratch
  int base = 0;               // its own priority (rt_wait_prio), 0: SCHED_OTHER
  pid_t ktid = 0;             // a kernel thread's tid (g == nullptr)
  int fowner = -1;            // scratch: a foreign owner's slot
  int fwaiter = -1;           // scratch: the waiter's own slot as a foreign owner
  bool shared = false;        // a process-shared mutex (the word holds shared ids)
  bool linked = false;
  // A process-shared mutex: the kernel tid its word last named that is no
  // thread of this process (another process's owner, never raised from
  // here), not checked again while the word names it; 0: none. Written
  // under pi_lock, read by the waiter without it.
  int notours = 0;
};

// Registered PiWaiters: a PI unlock recomputes only when there are some.
extern std::atomic<int32_t> pi_nwaiters;

// Any thread, no runtime lock held. The caller is about to wait for the
// PI mutex whose lock word is word (shared: process-shared, its owner
// recorded as tcb::shared_tid): registers w and recomputes.
void pi_wait_begin(PiWaiter* w, const int* word, bool shared);
// Whether the calling kernel thread (no goroutine) has a registered wait.
bool pi_foreign_waiting();
// Whether the caller's wait must come back every kPiRecheckNs to
// recompute (it has a priority to give, or an inherited one).
bool pi_wait_timed(const PiWaiter* w);
// The caller's wait slice ended: recompute, unless w (the caller's wait)
// still waits for an owner in another process (PiWaiter::notours): it
// gives nobody anything, and the waits of those that do have slices of
// their own.
void pi_recompute_now(const PiWaiter* w);
// The caller leaves the wait (lock taken, error, timeout): unregisters w
// and recomputes. No-op if w was never registered.
void pi_wait_end(PiWaiter* w);
// The caller's asynchronous cancellation is about to unwind its frames,
// the registered wait's among them: unregisters it. Any thread.
void pi_wait_drop_self();
// The caller has just released a PI mutex. yielding: a goroutine caller
// will give its M to the next G at once if told to (it returns true: a
// boosted G waits on a run queue, and the caller's M now has its priority
// until it runs a G).
bool pi_unlocked_slow(bool yielding);
inline bool pi_after_unlock(bool yielding) {
  if (__builtin_expect(pi_nwaiters.load(std::memory_order_acquire) != 0, 0))
    return pi_unlocked_slow(yielding);
  return false;
}

// The scheduler, on the M about to run gp (execute, park's direct switch).
void pi_sched_in_slow(M* mp, G* gp);
inline void pi_sched_in(M* mp, G* gp) {
  if (__builtin_expect(gp->pi_boost.load(std::memory_order_relaxed) !=
                           mp->pi_prio.load(std::memory_order_relaxed),
                       0))
    pi_sched_in_slow(mp, gp);
}
// In a fork child, on its only thread (both modes): no waits, no raises.
void pi_after_fork();
// In a fork child, after pi_after_fork, on its only thread (shim/fork.cpp):
// ptid is the parent's thread that forked; if it was raised as a
// kernel-thread owner, this thread gets that thread's own scheduling back.
void pi_fork_child_self(pid_t ptid);
// Whether kernel thread tid of this process is raised as an owner now; if
// so, its own scheduling (as read when it was raised, SCHED_RESET_ON_FORK
// included) in *pol, *sp: what it reads back (pthread_getschedparam,
// sched_getscheduler, sched_getparam), as natively. Any thread; costs a
// load when nothing is raised.
bool pi_own_sched(pid_t tid, int* pol, struct sched_param* sp);
// On the M, for core/rtlock.cpp: sets its own kernel thread's scheduling
// (policy pol, SCHED_RESET_ON_FORK added; SCHED_OTHER without it where
// permitted) and, if that succeeds, forgets the boost pi_prio recorded
// (the next recomputation applies a boost again over the new policy), both
// under pi_lock: a recomputation between the two would raise the thread
// after its own policy was set and then be forgotten, leaving it at
// SCHED_FIFO with pi_prio 0 for good. Returns 0 or -errno.
long pi_m_set_own(M* mp, int pol, int prio);
// An M about to sleep without a G (stopm): back to SCHED_OTHER.
inline void pi_m_idle(M* mp) {
  if (__builtin_expect(mp->pi_prio.load(std::memory_order_relaxed) != 0, 0))
    pi_sched_in_slow(mp, nullptr);
}

}  // namespace goshim
