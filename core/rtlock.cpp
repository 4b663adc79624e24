// Real-time goroutines: binding a G to its M (see rtlock.hpp).
#include "core/rtlock.hpp"

#include <errno.h>

#include "core/contract.hpp"
#include "core/pi.hpp"
#include "core/proc.hpp"
#include "core/sched.hpp"
#include "core/sema.hpp"
#include "syscalls/blocking.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

// Applies policy/prio to the calling kernel thread (the current G's M).
// Returns 0 or errno.
int apply(int policy, int prio) {
  // An inherited priority (core/pi.hpp) is no longer applied: the next
  // recomputation applies it again over the new policy.
  long r = pi_m_set_own(getg()->m, policy, prio);
  if (r < 0) return (int)-r;
  getg()->m->rt = true;  // from here its spin waits must sleep (rt_spin_yield)
  return 0;
}

// The kernel thread goes back to SCHED_OTHER before it runs other Gs.
// Without the privilege, clearing SCHED_RESET_ON_FORK is refused: keep it.
void restore_other() {
  pi_m_set_own(getg()->m, SCHED_OTHER, 0);  // as in apply()
  getg()->m->rt = false;
}

// On user G, with its policy applied to this M: give the P away for good.
void bind(G* gp) {
  GOSHIM_ON_USER_G();
  int saved = errno;
  M* mp = gp->m;
  gp->rt_locked = true;
  enter_blocking(BlockKind::Long, "real-time");
  P* pp = mp->oldp;
  if (pp) {
    PStatus s = PStatus::Syscall;
    if (pp->status.compare_exchange_strong(s, PStatus::Idle, std::memory_order_acq_rel)) {
      mp->oldp = nullptr;
      sched.nhandoff.fetch_add(1, std::memory_order_relaxed);
      handoffp(pp);
    }
    mp->oldp = nullptr;  // else sysmon took it meanwhile: not ours either
  }
  errno = saved;
}

// On a bound G: back to SCHED_OTHER and to a P.
void unbind(G* gp) {
  int saved = errno;
  restore_other();
  gp->rt_locked = false;
  exit_blocking();
  errno = saved;
}

int effective(G* gp, int prio) { return gp->rt_pp_max > prio ? gp->rt_pp_max : prio; }

}  // namespace

void rt_spin_yield() {
  G* g = tls_g;
  if (g && g->m && (g->m->rt || g->m->pi_prio.load(std::memory_order_relaxed))) {
    struct timespec ts = {0, 50 * 1000};
    sys::nanosleep(&ts, nullptr);
  } else {
    spin_yield();  // a foreign thread: asks the kernel
  }
}

int rt_set_self(int policy, int prio) {
  GOSHIM_ON_USER_G();
  G* gp = getg();
  int pol = policy & ~SCHED_RESET_ON_FORK;
  if (rt_policy(pol)) {
    int r = apply(pol, effective(gp, prio));
    if (r) return r;
    gp->sched_policy = pol;
    gp->sched_priority = prio;
    gp->rt_pending.store(false, std::memory_order_relaxed);
    if (!gp->rt_locked) bind(gp);
    return 0;
  }
  gp->sched_policy = pol;
  gp->sched_priority = prio;
  gp->rt_pending.store(false, std::memory_order_relaxed);
  if (gp->rt_locked && gp->tid_bound) {
    // Stays bound (rt_bind_kernel_thread): its kernel thread is its own
    // and takes the policy asked for (SCHED_OTHER, SCHED_BATCH,
    // SCHED_IDLE), which sched_getscheduler then reads from the kernel.
    int saved = errno;
    struct sched_param sp = {};
    if (pol == SCHED_OTHER ||
        sys::sched_setscheduler(0, pol | SCHED_RESET_ON_FORK, &sp) < 0)
      restore_other();
    gp->m->rt = false;
    errno = saved;
  } else if (gp->rt_locked) {
    unbind(gp);
  }
  return 0;
}

void rt_bind_kernel_thread(G* gp) {
  GOSHIM_ON_USER_G();
  gp->tid_bound = true;
  if (!gp->rt_locked) bind(gp);
}

int kernel_wait_prio() {
  long pol = sys::sched_getscheduler(0);
  if (pol < 0) return 0;
  pol &= ~(long)SCHED_RESET_ON_FORK;
  if (pol != SCHED_FIFO && pol != SCHED_RR) return 0;
  struct sched_param sp;
  if (sys::sched_getparam(0, &sp) < 0) return 0;
  return sp.sched_priority;
}

int rt_pp_change(G* gp, int previous, int next) {
  constexpr int kN = sizeof gp->rt_pp_ceil / sizeof gp->rt_pp_ceil[0];
  int priomax = gp->rt_pp_max;
  int newmax = priomax;
  if (next != -1) {
    int slot = -1;
    for (int i = 0; i < kN; i++) {
      if (gp->rt_pp_count[i] && gp->rt_pp_ceil[i] == next) {
        slot = i;
        break;
      }
      if (!gp->rt_pp_count[i] && slot < 0) slot = i;
    }
    if (slot < 0 || gp->rt_pp_count[slot] + 1 == 0) return EAGAIN;
    gp->rt_pp_ceil[slot] = (uint8_t)next;
    gp->rt_pp_count[slot]++;
    if (next > priomax) newmax = next;
  }
  if (previous != -1) {
    for (int i = 0; i < kN; i++) {
      if (!gp->rt_pp_count[i] || gp->rt_pp_ceil[i] != previous) continue;
      if (--gp->rt_pp_count[i] == 0 && priomax == previous && previous > next) {
        newmax = 0;
        for (int j = 0; j < kN; j++)
          if (gp->rt_pp_count[j] && gp->rt_pp_ceil[j] > newmax) newmax = gp->rt_pp_ceil[j];
      }
      break;
    }
  }
  if (priomax == newmax) return 0;
  gp->rt_pp_max = newmax;
  int base = gp->sched_priority;
  if (base >= newmax && base >= priomax) return 0;
  int prio = base < newmax ? newmax : base;
  if (!rt_policy(gp->sched_policy)) return prio == 0 ? 0 : EINVAL;
  if (gp->rt_locked) return apply(gp->sched_policy, prio);
  return 0;  // a pending request (rt_request): applied when it binds
}

void rt_after_fork() {
  G* gp = getg();
  if (gp && !gp->is_g0() && gp->rt_locked && rt_policy(gp->sched_policy))
    apply(gp->sched_policy, effective(gp, gp->sched_priority));
}

void rt_exit_m() {
  GOSHIM_ON_G0();
  GOSHIM_WITHOUT_P();
  restore_other();
  sched.lock.lock();
  P* pp = pidleget();
  sched.lock.unlock();
  if (pp) {
    acquirep(pp);
    schedule();
  }
  stopm();
  schedule();
}

bool rt_start(G* gp) {
  RtStart* rs = (RtStart*)gp->rt_start;
  gp->rt_start = nullptr;
  bool yield = rs->creator_bound;
  int r = apply(gp->sched_policy, gp->sched_priority);
  // Nobody will join a G whose creation failed: it frees itself.
  if (r) gp->join_state.fetch_or(kJoinDetached, std::memory_order_acq_rel);
  rs->err = r;
  rs->done.store(1, std::memory_order_release);
  // Only the address is used from here: the creator may have returned.
  sema_wake(&rs->done, 1);
  if (r) return false;
  // A real-time creator of the same priority goes first, as natively
  // (there the new thread waits behind it in the kernel's FIFO order).
  if (yield) sys::sched_yield();
  bind(gp);
  return true;
}

int rt_start_wait(RtStart* rs) {
  while (rs->done.load(std::memory_order_acquire) == 0)
    sema_wait(&rs->done, 0, 0, WaitReason::Join);
  return rs->err;
}

void rt_request(G* gp) {
  gp->rt_pending.store(true, std::memory_order_release);
  gp->preempt.store(true, std::memory_order_release);
}

void rt_pending_apply(G* gp) {
  GOSHIM_ON_USER_G();
  if (!gp->rt_pending.exchange(false, std::memory_order_acq_rel)) return;
  if (gp->rt_locked || !rt_policy(gp->sched_policy)) return;
  // The requester already returned 0 (it checked the privilege as it
  // could); a refusal by the kernel now leaves the G M:N.
  if (apply(gp->sched_policy, effective(gp, gp->sched_priority)) == 0) bind(gp);
}

}  // namespace goshim
