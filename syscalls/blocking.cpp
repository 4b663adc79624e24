// enter_blocking / exit_blocking (see blocking.hpp), after Go's
// entersyscall / exitsyscall.
//
//   G in a blocking call                  sysmon (or the G itself, Long)
//   --------------------                  ------------------------------
//   P: Running -> Syscall  [S]
//   (kernel call)                         sees P in Syscall with the same
//                                         syscalltick for a while:
//                                         CAS Syscall -> Idle, handoffp
//   CAS P Syscall -> Running  (fast path: the P is ours again)
//   else: another idle P, else queue the G and stop the M (slow path)
//
// Whoever wins the CAS on the P's status owns it; the other side moves on.
#include "syscalls/blocking.hpp"

#include <errno.h>

#include "arch/arch.hpp"
#include "core/contract.hpp"
#include "core/cputime.hpp"
#include "core/netpoll.hpp"
#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "core/signal.hpp"
#include "core/scstore.hpp"
#include "core/sysmon.hpp"
#include "core/trace.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

[[noreturn]] void execute_g(G* gp, bool inherit_time);  // park.cpp

void enter_blocking(BlockKind kind, const char* what) {
  GOSHIM_ON_USER_G();
  G* gp = getg();
  M* mp = gp->m;
  P* pp = mp->p;
  cputime_block_enter(gp);
  if (__builtin_expect(pp->retired.load(std::memory_order_acquire), 0)) {
    // Replaced while this M was stuck: give it up now, return without one.
    int saved = errno;
    retire_p(releasep());
    errno = saved;
    gp->blocking_what = what;
    gp->syscall_since = sys::coarsetime();
    trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Blocking);
    trace_ev(TraceEv::BlockBegin, gp);
    gp->status.store(GStatus::Syscall, std::memory_order_release);
    mp->syscalltick.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  gp->blocking_what = what;
  gp->syscall_since = sys::coarsetime();
  trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Blocking);
  trace_ev(TraceEv::BlockBegin, gp);
  gp->status.store(GStatus::Syscall, std::memory_order_release);
  mp->syscalltick.fetch_add(1, std::memory_order_relaxed);
  pp->syscalltick.fetch_add(1, std::memory_order_relaxed);
  // Detach the P but keep it reserved for this M (oldp).
  pp->blocking_m.store(mp, std::memory_order_relaxed);
  pp->m = nullptr;
  mp->oldp = pp;
  mp->p = nullptr;
  sc_store(pp->status, PStatus::Syscall);
  if (kind == BlockKind::Long &&
      (!runqempty(pp) || sched.runqsize.load(std::memory_order_relaxed) > 0)) {
    // Runnable work would wait for this call: hand the P off right now.
    PStatus s = PStatus::Syscall;
    if (pp->status.compare_exchange_strong(s, PStatus::Idle, std::memory_order_acq_rel)) {
      mp->oldp = nullptr;
      sched.nhandoff.fetch_add(1, std::memory_order_relaxed);
      int saved = errno;
      handoffp(pp);
      errno = saved;
    }
  } else if (!runqempty(pp) || sched.runqsize.load(std::memory_order_relaxed) > 0) {
    // Short: sysmon hands the P off if the call lasts; make sure it is
    // looking (Go's sysmon may be asleep for up to 10 ms here).
    int saved = errno;
    sysmon_kick();
    errno = saved;
  }
}

// On g0: no P could be had on the way back; queue the G and stop the M.
static void exitsyscall_g0(void* arg) {
  GOSHIM_ON_G0();
  G* gp = (G*)arg;
  M* mp = gp->m;
  cputime_out(gp);
  gp->status.store(GStatus::Runnable, std::memory_order_release);
  mp->curg = nullptr;
  gp->m = nullptr;
  sched.lock.lock();
  P* pp = pidleget();
  // No idle P: one kept for an M whose thread is still being created. That
  // creation may wait for the program's allocator lock, which this G may
  // hold (it blocked inside its allocator: tests/preload/own_malloc_reentry).
  if (!pp) pp = mstart_reclaim_locked();
  if (!pp) {
    sched.runq.push_back(gp);
    sched.runqsize.store(sched.runq.size, std::memory_order_relaxed);
  }
  sched.lock.unlock();
  if (pp) {
    acquirep(pp);
    execute_g(gp, false);
  }
  stopm();
  schedule();
}

void exit_blocking() {
  int saved = errno;
  G* gp = getg();
  M* mp = gp->m;
  P* oldp = mp->oldp;
  mp->oldp = nullptr;
  cputime_block_exit(gp);
  trace_ev(TraceEv::BlockEnd, gp);
  gp->blocking_what = nullptr;
  // Fast path: the P is still reserved for us.
  if (oldp) {
    PStatus s = PStatus::Syscall;
    if (oldp->status.compare_exchange_strong(s, PStatus::Running, std::memory_order_acq_rel)) {
      mp->p = oldp;
      oldp->m = mp;
      gp->status.store(GStatus::Running, std::memory_order_release);
      trace_ev(TraceEv::GStart, gp);
      errno = saved;
      return;
    }
  }
  // Any idle P.
  if (sched.npidle.load(std::memory_order_relaxed) > 0) {
    sched.lock.lock();
    P* pp = pidleget();
    sched.lock.unlock();
    if (pp) {
      acquirep(pp);
      gp->status.store(GStatus::Running, std::memory_order_release);
      trace_ev(TraceEv::GStart, gp);
      errno = saved;
      return;
    }
  }
  // Slow path: the G waits on the global queue; this M goes idle.
  goshim_mcall(gp, exitsyscall_g0, mp->g0_sp, mp->g0.tp);
  errno = saved;
}

}  // namespace goshim

// Cancellation unwinds through a blocking section (syscalls/blocking_unwind.c):
// leave it first, so that cleanup handlers and the G's exit run with a P.
// (A cancellation delivered by signal may have left it already.)
namespace goshim {
void blocking_guarded(bool on) {
  G* gp = getg();
  gp->unwind_guarded = on;
  // glibc up to 2.40 looks at a pending cancellation at a cancellable
  // call's entry only when it switches the thread to asynchronous mode; a
  // thread asynchronous already relies on SIGCANCEL, which pthread_cancel
  // does not send to a G not yet in its blocking section (cancel_send), and
  // whose handler never unwinds goshim's frames around the call: deferred
  // for the call, glibc's entry check sees it.
  if (on)
    cancel_async_suspend(gp);
  else if (gp->guarded_async.load(std::memory_order_relaxed))
    cancel_async_restore(gp);
}
}  // namespace goshim

extern "C" __attribute__((visibility("hidden"))) void goshim_exit_blocking_for_unwind() {
  goshim::G* gp = goshim::getg();
  gp->unwind_guarded = false;
  gp->guarded_async.store(false, std::memory_order_relaxed);  // the thread ends: its type no longer matters
  if (gp->status.load(std::memory_order_acquire) == goshim::GStatus::Syscall) goshim::exit_blocking();
}
