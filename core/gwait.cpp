// One-shot wake token (see gwait.hpp).
#include "arch/arch.hpp"
#include "core/contract.hpp"
#include "core/gwait.hpp"

#include "core/netpoll.hpp"
#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "core/signal.hpp"
#include "core/timer.hpp"

namespace goshim {

namespace {

enum : uint64_t {
  kIdle = 0,
  kArming = 1,
  kParked = 2,
  kClaimed = 3,
  kStateMask = 3,
  kNetpollBit = 1u << 2,
};

inline uint64_t tok_seq(uint64_t t) { return t >> 8; }
inline uint64_t tok_state(uint64_t t) { return t & kStateMask; }
inline WakeReason tok_reason(uint64_t t) { return (WakeReason)((t >> 4) & 0xF); }
inline uint64_t tok_make(uint64_t seq, WakeReason r, uint64_t np, uint64_t state) {
  return seq << 8 | (uint64_t)r << 4 | np | state;
}

}  // namespace

bool gwait_park_unlockf(G* gp, void* mp) { return gwait_commit(gp, (M*)mp); }

bool gwait_commit(G* gp, M* mp) {
  uint64_t t = gp->wtoken.load(std::memory_order_relaxed);
  if (gp->wait_cancel_point) {
    // pthread_cancel sets the canceled bit [S] before it looks at the
    // status [L] to interrupt a Waiting G (cancel_send); gp's status is
    // Waiting [S] here: with the barrier, either the canceler interrupts
    // the wait or this sees the cancellation [L] (as sema's
    // unlock_bucket_cancellable).
    arch::full_barrier();
    if (__builtin_expect(cancel_pending(gp), 0)) {
      gwait_claim(gp, tok_seq(t), WakeReason::Intr, nullptr);
      return false;  // resume at once: claimed (by this or another source)
    }
  }
  for (;;) {
    if (tok_state(t) != kArming) return false;  // claimed: resume at once
    uint64_t n = (t & ~kStateMask) | kParked;
    // [S2] pairs with the claimer's CAS: it sees Parked only after the G's
    // status is Waiting (stored by park_g0 before this unlockf runs).
    if (gp->wtoken.compare_exchange_weak(t, n, std::memory_order_acq_rel)) {
      if (t & kNetpollBit) netpoll_adjust_waiters_on(mp, 1);
      return true;
    }
  }
}

uint64_t gwait_arm(G* gp, WaitKind kind, bool cancel_point) {
  GOSHIM_ON_USER_G();
  // Only the G itself advances parkseq (here and in sema_wait): no RMW.
  uint64_t seq = gp->parkseq.load(std::memory_order_relaxed) + 1;
  gp->parkseq.store(seq, std::memory_order_relaxed);
  uint64_t np = kind == WaitKind::Netpoll ? (uint64_t)kNetpollBit : 0u;
  // [S1] release: the records and timer set up after this carry seq.
  gp->wtoken.store(tok_make(seq, WakeReason::None, np, kArming), std::memory_order_release);
  gp->wait_cancel_point = cancel_point;
  gp->wait_kind.store(kind, std::memory_order_release);
  return seq;
}

WakeReason gwait_disarm(G* gp) {
  GOSHIM_ON_USER_G();
  gp->wait_kind.store(WaitKind::None, std::memory_order_relaxed);
  uint64_t t = gp->wtoken.load(std::memory_order_acquire);
  for (;;) {
    if (tok_state(t) == kClaimed) {
      gp->wtoken.store(t & ~kStateMask, std::memory_order_relaxed);  // Idle
      return tok_reason(t);
    }
    GOSHIM_CHECK(tok_state(t) == kArming, "gwait_disarm: not arming");
    if (gp->wtoken.compare_exchange_weak(t, t & ~kStateMask, std::memory_order_acq_rel))
      return WakeReason::None;
  }
}

bool gwait_claim(G* gp, uint64_t seq, WakeReason why, GQueue* q, bool parked_only) {
  uint64_t t = gp->wtoken.load(std::memory_order_acquire);
  for (;;) {
    if (tok_seq(t) != seq) return false;  // a later wait, or no wait
    uint64_t st = tok_state(t);
    if (st == kIdle || st == kClaimed) return false;
    if (st == kArming && parked_only) return false;
    uint64_t n = tok_make(seq, why, t & kNetpollBit, kClaimed);
    if (gp->wtoken.compare_exchange_weak(t, n, std::memory_order_acq_rel)) {
      if (st == kParked) {
        if (t & kNetpollBit) netpoll_adjust_waiters(-1);
        if (q)
          q->push_back(gp);
        else
          ready(gp, true);
      }
      return true;
    }
  }
}

void gwait_timer_fire(void* arg, uint64_t seq) {
  gwait_claim((G*)arg, seq, WakeReason::Timeout, nullptr);
}

bool gwait_interrupt(G* gp) {
  uint64_t t = gp->wtoken.load(std::memory_order_acquire);
  uint64_t st = tok_state(t);
  if (st != kArming && st != kParked) return false;
  return gwait_claim(gp, tok_seq(t), WakeReason::Intr, nullptr);
}

void gwait_arm_timer(G* gp, uint64_t seq, int64_t deadline) {
  gp->timer.f = gwait_timer_fire;
  gp->timer.arg = gp;
  gp->timer.seq = seq;
  // gp is about to park, and its M then looks for work itself: it runs
  // the timer, or sleeps in netpoll until it, or breaks the M that sleeps
  // there past it (findrunnable). Another M is woken (wake_netpoller) only
  // when some other goroutine could keep this M busy: the process's only
  // goroutine arming a sleep made a kernel thread that found nothing to do
  // (every `sleep 1` of a shell script).
  bool earliest = timer_add(&gp->timer, deadline, false);
  if (earliest && (sched.lastpoll.load(std::memory_order_seq_cst) == 0 ||
                   sched.ngoroutines.load(std::memory_order_seq_cst) > 1))
    wake_netpoller(deadline);
}

}  // namespace goshim
