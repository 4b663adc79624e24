// Sleeps on the timer heap (see sleep.hpp).
#include "core/sleep.hpp"

#include <errno.h>

#include "core/gwait.hpp"
#include "core/sched.hpp"
#include "core/signal.hpp"
#include "core/timer.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {
constexpr int64_t kNs = 1000000000;
constexpr int64_t kForever = INT64_MAX / 2;  // ~146 years: later deadlines are clamped

int64_t add_sat(int64_t a, int64_t b) { return b > kForever - a ? kForever : a + b; }
}  // namespace

int sleep_until(int64_t deadline, int64_t* left) {
  G* gp = getg();
  cancel_point();  // the sleeps are cancellation points
  uint32_t h0 = gp->nhandled;
  WakeReason r;
  for (;;) {
    if (deadline <= sys::nanotime()) return 0;
    uint64_t seq = gwait_arm(gp, WaitKind::Sleep, true);
    gwait_arm_timer(gp, seq, deadline);
    if (__builtin_expect(gp->nhandled != h0, 0)) {
      timer_del(&gp->timer);
      r = gwait_disarm(gp);
      if (r == WakeReason::None) r = WakeReason::Handled;
    } else {
      r = gwait_park(gp, WaitReason::Sleep, nullptr);
    }
    if (r == WakeReason::Timeout) return 0;
    timer_del(&gp->timer);
    // Woken for a signal another G took (or one ignored), no handler run
    // here: the sleep goes on, as the kernel restarts it.
    if (r != WakeReason::Intr || !signal_interrupt_lost(gp, h0)) break;
    cancel_point();
  }
  // Only a signal ends a sleep early. Consume the interruption record; the
  // answer does not matter: Linux never restarts a sleep after a handler.
  (void)signal_restart_since(gp, h0);
  int64_t l = deadline - sys::nanotime();
  *left = l > 0 ? l : 0;
  cancel_point();  // pthread_cancel interrupts the sleep too
  return EINTR;
}

bool sleep_deadline(clockid_t clk, int flags, const struct timespec* req, int64_t* deadline) {
  if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC && clk != CLOCK_BOOTTIME && clk != CLOCK_TAI)
    return false;
  int64_t t = req->tv_sec > kForever / kNs ? kForever : (int64_t)req->tv_sec * kNs + req->tv_nsec;
  if (!(flags & TIMER_ABSTIME)) {
    *deadline = add_sat(sys::nanotime(), t);
    return true;
  }
  // The clock first, then the monotonic time: the sleep may end late by
  // the gap between the two reads, never early.
  int64_t cnow;
  if (clk == CLOCK_MONOTONIC) {
    cnow = sys::nanotime();
  } else {
    struct timespec ts;
    sys::clock_gettime(clk, &ts);
    cnow = (int64_t)ts.tv_sec * kNs + ts.tv_nsec;
  }
  int64_t now = sys::nanotime();
  int64_t d = t - cnow;  // may be negative: already passed
  *deadline = d <= 0 ? now : add_sat(now, d);
  return true;
}

}  // namespace goshim
