// One-shot wake token for a G parked on several sources at once: fds
// (netpoll), its timer (deadline, sleep), a signal (interrupt_wait) and a
// same-process writer (direct handoff). Whoever claims the token first
// wins and is the only one to ready the G; every other source finds it
// claimed and does nothing. sema.cpp needs none of this because a sema
// waiter sits on exactly one queue under one lock; a G in poll() sits on
// many descriptors' queues with no common lock.
//
// G::wtoken = seq << 8 | reason << 4 | netpoll << 2 | state
//
//   state   Idle     no wait in progress
//           Arming   the G is registering itself; it has not parked yet
//           Parked   park's unlockf committed: the G is Waiting
//           Claimed  a source won; `reason` says which
//
//   G (arming)                         a source (timer, event, signal)
//   ----------                         -------------------------------
//   token = seq|Arming          [S1]
//   queue records, arm timer
//   park: on g0, status=Waiting
//   CAS Arming -> Parked        [S2]   CAS seq|Arming -> seq|Claimed  (G resumes by
//     fails if Claimed:                  itself: its unlockf's CAS fails)
//     resume at once                   CAS seq|Parked -> seq|Claimed  -> ready(G)
//
// Only a claim from Parked readies the G, and Parked is published after
// the G's registers are saved (park.cpp), so a G is never readied twice or
// before it has stopped. `seq` (from G::parkseq) tells a late source from
// the current wait. Wait-side calls are on user G; claims any thread.
#pragma once

#include <stdint.h>

#include "core/gmp.hpp"
#include "core/sched.hpp"

namespace goshim {

enum class WakeReason : uint8_t {
  None = 0,
  Ready = 1,    // an fd event: retry the operation
  Timeout = 2,  // the deadline passed
  Intr = 3,     // a signal (interrupt_wait)
  Handoff = 4,  // a same-process writer delivered data (PollWaiter::got)
  Handled = 5,  // a program signal handler ran on the G during the operation,
                // before it could park (signal_restart_since decides)
};

// On user G. Starts a wait and returns its seq. kind (Netpoll or Sleep)
// goes to G::wait_kind so that interrupt_wait finds the wait; a Netpoll
// wait counts as a netpoll waiter while parked (netpoll_any_waiters).
// cancel_point: the wait is a cancellation point; it does not park with a
// cancellation pending (gwait_commit) but ends as interrupted (Intr).
uint64_t gwait_arm(G* gp, WaitKind kind, bool cancel_point);

// On user G. Abandons a wait that never parked. Returns None if nobody
// claimed it, else the reason of the claim that came first (the caller
// must honour it: an Intr must not be lost).
WakeReason gwait_disarm(G* gp);

// On user G, after gwait_arm. Parks until a source claims the wait
// (returns at once if one already did) and returns the reason. The token
// is Idle again on return. Inline: the fewer frames between the program's
// call and the switch, the fewer returns mispredict after it.
inline WakeReason gwait_park(G* gp, WaitReason why, const void* obj);

// Park's unlockf (exposed for tests): on g0, or on the next G's stack in
// park's direct switch, after gp's context is saved. Commits the park of an
// arming wait: Arming -> Parked. Returns false if a source claimed the
// wait first (the G then resumes at once), or if the wait is a
// cancellation point and gp's cancellation is pending: claimed Intr then.
// mp: the M doing the park (its waiter count); nullptr: the caller's.
bool gwait_commit(G* gp, M* mp = nullptr);

// Any thread. Claims gp's wait seq for why. Returns true if this call won.
// If the G had parked, it is readied: pushed on q when q is non-null (the
// caller readies the list after dropping its locks), else ready()'d now.
// parked_only: claim only a G that has parked (the handoff: the claimer
// writes into the G's buffer, which it may do only while the G is stopped).
bool gwait_claim(G* gp, uint64_t seq, WakeReason why, GQueue* q, bool parked_only = false);

bool gwait_park_unlockf(G* gp, void* mp);  // park's unlockf: gwait_commit

inline WakeReason gwait_park(G* gp, WaitReason why, const void* obj) {
  // The unlockf may run on the next G's stack (park's direct hand-off),
  // where getg() is not the parking G: tell it the M.
  park(gwait_park_unlockf, gp->m, why, obj);
  gp->wait_kind.store(WaitKind::None, std::memory_order_relaxed);
  uint64_t t = gp->wtoken.load(std::memory_order_acquire);
  gp->wtoken.store(t & ~(uint64_t)3, std::memory_order_relaxed);  // Idle
  return (WakeReason)((t >> 4) & 0xF);
}

// Timer callback for a wait's deadline (G::timer, arg = gp).
void gwait_timer_fire(void* arg, uint64_t seq);

// Interrupter registered for WaitKind::Netpoll and WaitKind::Sleep.
bool gwait_interrupt(G* gp);

// Arms G::timer for the current wait (seq) at deadline (monotonic ns).
void gwait_arm_timer(G* gp, uint64_t seq, int64_t deadline);

}  // namespace goshim
