// park / ready: the only two ways a G stops and restarts.
//
//   user G                         g0 of the same M              any waker
//   ------                         ----------------              ---------
//   record wait (under lock L)
//   park(unlock_L)  --mcall-->     status = Waiting  [S]
//                                  unlockf: release L
//                                  schedule()
//                                                                take L, find G  [L]
//                                                                ready(G): Waiting -> Runnable
//
// The G's context is saved before unlockf runs, and a waker can only find
// the G through the lock unlockf releases, so a waker never resumes a G
// whose registers are still being saved.
#include "arch/arch.hpp"
#include "core/gmp.hpp"
#include "core/netpoll.hpp"
#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "core/trace.hpp"
#include "core/signal.hpp"
#include "core/timer.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

static const char* const kWaitReasonNames[] = {
    "",                  // None
    "pthread_join",      // Join
    "pthread_once",      // Once
    "sleep",             // Sleep
    "mutex",             // Mutex
    "cond",              // Cond
    "rwlock",            // RWLock
    "barrier",           // Barrier
    "semaphore",         // Semaphore
    "futex",             // Futex
    "IO wait (read)",    // IORead
    "IO wait (write)",   // IOWrite
    "poll",              // Poll
    "select",            // Select
    "epoll_wait",        // EpollWait
    "accept",            // Accept
    "connect",           // Connect
    "sigwait",           // SigWait
    "preempted",         // Preempted
    "yield",             // Yield
    "blocking call",     // Blocking
    "atomic wait",       // AtomicWait
};
static_assert(sizeof(kWaitReasonNames) / sizeof(kWaitReasonNames[0]) == (size_t)WaitReason::Count,
              "every WaitReason needs a name");

static bool (*interrupters[4])(G*) = {};

void register_wait_interrupter(WaitKind kind, bool (*fn)(G* gp)) {
  interrupters[(int)kind] = fn;
}

bool interrupt_wait(G* gp) {
  WaitKind k = gp->wait_kind.load(std::memory_order_acquire);
  bool (*fn)(G*) = interrupters[(int)k];
  return fn ? fn(gp) : false;
}

const char* wait_reason_name(WaitReason r) {
  return (size_t)r < (size_t)WaitReason::Count ? kWaitReasonNames[(size_t)r] : "?";
}

// Runs gp on the current M. On g0, with a P. Never returns.
[[noreturn]] static void execute(G* gp, bool inherit_time) {
  M* mp = getg()->m;
  mp->curg = gp;
  gp->m = mp;
  gp->status.store(GStatus::Running, std::memory_order_relaxed);
  gp->preempt.store(false, std::memory_order_relaxed);
  if (!inherit_time) mp->p->schedtick++;
  trace_ev(TraceEv::GStart, gp);
  signal_apply(mp, gp);  // the G's signal mask and altstack, if they differ
  goshim_gogo(gp->sched_sp, gp->tp);
}

// Entry from the scheduler loop (sched.cpp) to run a G.
[[noreturn]] void execute_g(G* gp, bool inherit_time) { execute(gp, inherit_time); }

// On g0. Continuation of park().
static void park_g0(void* arg) {
  G* gp = (G*)arg;
  M* mp = gp->m;
  trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Park, gp->waitobj);
  // [S] the G is parked once this store is visible; its registers are saved.
  gp->status.store(GStatus::Waiting, std::memory_order_release);
  mp->curg = nullptr;
  gp->m = nullptr;
  sched.nparks.fetch_add(1, std::memory_order_relaxed);
  if (mp->waitunlockf) {
    bool ok = mp->waitunlockf(gp, mp->waitlock);
    mp->waitunlockf = nullptr;
    mp->waitlock = nullptr;
    if (!ok) {
      gp->status.store(GStatus::Runnable, std::memory_order_relaxed);
      execute(gp, true);
    }
  }
  schedule();
}

void park(bool (*unlockf)(G*, void*), void* arg, WaitReason reason, const void* obj) {
  G* gp = getg();
  M* mp = gp->m;
  GOSHIM_DCHECK(!gp->is_g0(), "park on g0");
  mp->waitunlockf = unlockf;
  mp->waitlock = arg;
  gp->waitreason = reason;
  gp->waitobj = obj;
  gp->waitsince = sys::coarsetime();  // for dumps: the coarse clock is enough
  goshim_mcall(gp, park_g0, mp->g0_sp, mp->g0.tp);
  gp->waitreason = WaitReason::None;
  gp->waitobj = nullptr;
  if (__builtin_expect(signal_has_pending(gp), 0)) signal_deliver(gp);
}

void ready(G* gp, bool next) {
  GStatus s = GStatus::Waiting;
  if (!gp->status.compare_exchange_strong(s, GStatus::Runnable, std::memory_order_acq_rel))
    fatalf("ready: G %lu is not waiting (status %u)", (unsigned long)gp->goid, (unsigned)s);
  trace_ev(TraceEv::GReady, gp, gp->goid);
  G* cur = getg();
  M* mp = cur ? cur->m : nullptr;
  if (mp && mp->p && !mp->p->retired.load(std::memory_order_relaxed)) {
    mp->locks.fetch_add(1, std::memory_order_relaxed);
    runqput(mp->p, gp, next);
    mp->locks.fetch_sub(1, std::memory_order_relaxed);
  } else {
    globrunqput(gp);
  }
  wakep();
}

void ready_list(GQueue& q) {
  if (q.empty()) return;
  G* cur = getg();
  M* mp = cur ? cur->m : nullptr;
  for (G* gp = q.head; gp; gp = gp->schedlink) {
    GStatus s = GStatus::Waiting;
    if (!gp->status.compare_exchange_strong(s, GStatus::Runnable, std::memory_order_acq_rel))
      fatal("ready_list: G is not waiting");
  }
  if (mp && mp->p && !mp->p->retired.load(std::memory_order_relaxed)) {
    // Hand one G to each idle P through the global queue, the rest stay local.
    int32_t npidle = sched.npidle.load(std::memory_order_relaxed);
    GQueue glob;
    while (npidle-- > 0 && q.size > 1) glob.push_back(q.pop());
    if (!glob.empty()) {
      sched.lock.lock();
      globrunqputbatch(glob);
      sched.lock.unlock();
    }
    while (G* gp = q.pop()) runqput(mp->p, gp, false);
  } else {
    sched.lock.lock();
    globrunqputbatch(q);
    sched.lock.unlock();
  }
  wakep();
}

// On g0: gp yields to the tail of the local queue.
static void gosched_g0(void* arg) {
  G* gp = (G*)arg;
  M* mp = gp->m;
  trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Yield);
  gp->status.store(GStatus::Runnable, std::memory_order_release);
  mp->curg = nullptr;
  gp->m = nullptr;
  runqput(mp->p, gp, false);
  schedule();
}

// On g0: gp yields to the global queue.
static void gosched_global_g0(void* arg) {
  G* gp = (G*)arg;
  M* mp = gp->m;
  trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Yield);  // no-op after a preemption's stop
  gp->status.store(GStatus::Runnable, std::memory_order_release);
  mp->curg = nullptr;
  gp->m = nullptr;
  globrunqput(gp);
  schedule();
}

void gosched() {
  G* gp = getg();
  M* mp = gp->m;
  P* pp = mp->p;
  // Nothing else to run: a yield is a no-op, unless timers are due or the
  // network may have something (then the scheduler must look).
  if (runqempty(pp) && sched.runqsize.load(std::memory_order_relaxed) == 0 &&
      !netpoll_any_waiters()) {
    int64_t w = timers_wake_time(&pp->timers);
    if (w == 0 || w > sys::nanotime()) return;
  }
  // Like Go's Gosched: to the global queue, so that the yielder runs after
  // everything runnable anywhere, on whichever P gets to it first.
  goshim_mcall(gp, gosched_global_g0, mp->g0_sp, mp->g0.tp);
  if (__builtin_expect(signal_has_pending(gp), 0)) signal_deliver(gp);
}

void gosched_local() {
  G* gp = getg();
  M* mp = gp->m;
  goshim_mcall(gp, gosched_g0, mp->g0_sp, mp->g0.tp);
}

void gosched_global() {
  G* gp = getg();
  M* mp = gp->m;
  goshim_mcall(gp, gosched_global_g0, mp->g0_sp, mp->g0.tp);
}

}  // namespace goshim
