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
#include "core/contract.hpp"
#include "core/cputime.hpp"
#include "core/gmp.hpp"
#include "core/mcache.hpp"
#include "core/netpoll.hpp"
#include "core/pi.hpp"
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

// One more G runs from runnext, inheriting the slice.
static inline void chain_link(P* pp) {
  if (pp->chain_len++ == 0) pp->chain_start = sys::nanotime();
}

// Runs gp on the current M, with a P. Never returns. On g0, or on the stack
// of the G that park's direct hand-off was switching to (park_switch_post,
// when unlockf says gp must not park: that G goes back to runnext).
[[noreturn]] static void execute(G* gp, bool inherit_time) {
  GOSHIM_WITH_P();
  M* mp = getg()->m;
  mp->curg = gp;
  gp->m = mp;
  // A G found at once by the scheduler starts at the last one's end (its
  // search is charged to it); else now, the search is the M's own.
  cputime_in(mp, mp->cw.quick ? mp->cw.last : cputicks());
  mp->cw.quick = false;
  gp->status.store(GStatus::Running, std::memory_order_relaxed);
  // A pending real-time request (core/rtlock.hpp) is served at its next call.
  gp->preempt.store(gp->rt_pending.load(std::memory_order_relaxed), std::memory_order_relaxed);
  mp->p->park_futile = false;
  if (!inherit_time) {
    mp->p->schedtick++;
    mp->p->chain_len = 0;
  } else {
    chain_link(mp->p);
  }
  trace_ev(TraceEv::GStart, gp);
  pi_sched_in(mp, gp);          // an inherited priority follows the G (core/pi.hpp)
  signal_apply_resume(mp, gp);  // the G's signal mask and altstack, if they differ
  goshim_gogo(gp->sched_sp, gp->tp);
}

// Entry from the scheduler loop (sched.cpp) to run a G.
[[noreturn]] void execute_g(G* gp, bool inherit_time) { execute(gp, inherit_time); }

// On g0. Continuation of park().
static void park_g0(void* arg) {
  GOSHIM_ON_G0();
  G* gp = (G*)arg;
  M* mp = gp->m;
  signal_leave_altstack(mp);  // before gp is published (signal.hpp)
  trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Park, gp->waitobj);
  cputime_out(gp, mp, mp->cw.sw_tick);  // park's tick
  mcache_lend(gp);  // before gp is published
  // [S] the G is parked once this store is visible; its registers are saved.
  gp->status.store(GStatus::Waiting, std::memory_order_release);
  mp->curg = nullptr;
  gp->m = nullptr;
  mp->p->nparks++;
  if (mp->waitunlockf) {
    bool ok = mp->waitunlockf(gp, mp->waitlock);
    mp->waitunlockf = nullptr;
    mp->waitlock = nullptr;
    GOSHIM_NO_LOCKS("park: after unlockf");
    if (!ok) {
      gp->status.store(GStatus::Runnable, std::memory_order_relaxed);
      execute(gp, true);
    }
  }
  signal_parked(gp);
  schedule();
}

uint64_t total_parks() {
  uint64_t n = sched.nparks.load(std::memory_order_relaxed);
  for (int i = 0; i < sched.gomaxprocs; i++)
    if (P* pp = allp(i)) n += pp->nparks;  // racy reads: statistics
  return n;
}

// Direct hand-off (park's fast path). schedule() would pick pp's runnext
// right away when no timer of pp is due, the global queue has nothing that
// fairness could put first, and runnext is set; in that case park switches
// from the parking G to it directly (goshim_switch), skipping the trip
// through g0 and the scheduler loop. The continuation below then does on
// the new G's stack what park_g0 and execute() would have done.
//
// "No timer due" is judged with the coarse clock park reads anyway: a
// timer due within kDirectTimerSlack of it sends park the slow way.
constexpr int64_t kDirectTimerSlack = 20 * 1000 * 1000;  // > one jiffy at HZ=100

// On the new G's stack and TLS, its context not yet resumed; gp is the
// parked G (registers saved). Mirrors park_g0 + execute(next, true).
static void park_switch_post(void* arg) {
  G* gp = (G*)arg;
  M* mp = gp->m;
  G* next = getg();
  signal_leave_altstack(mp);  // before gp is published (signal.hpp)
  uint64_t now = mp->cw.sw_tick;  // park's
  cputime_out(gp, mp, now);  // before gp is published: a waker may run it elsewhere at once
  // This stack is next's: whatever unlockf calls that looks at
  // getg()->m (ready() puts on that M's P, the lock-order checker) must
  // find this M, not the one that last ran next.
  next->m = mp;
  mcache_lend(gp);  // before gp is published
  gp->status.store(GStatus::Waiting, std::memory_order_release);  // [S] as in park_g0
  gp->m = nullptr;
  mp->p->nparks++;
  bool (*unlockf)(G*, void*) = mp->waitunlockf;
  void* lock = mp->waitlock;
  mp->waitunlockf = nullptr;
  mp->waitlock = nullptr;
  bool keep = unlockf && !unlockf(gp, lock);
  GOSHIM_NO_LOCKS("park (direct switch): after unlockf");
  if (keep) {
    // gp must not park: it resumes at once; next goes back to runnext.
    runqput(mp->p, next, true);
    mp->curg = nullptr;
    gp->status.store(GStatus::Runnable, std::memory_order_relaxed);
    // A wait claimed while the G was still arming (fd and sleep waits,
    // core/gwait.hpp) gets here. execute() finds the M through next.
    execute(gp, true);
  }
  signal_parked(gp);
  mp->curg = next;
  cputime_in(mp, now);
  next->status.store(GStatus::Running, std::memory_order_relaxed);
  next->preempt.store(next->rt_pending.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // inherits the time slice, as a runnext G does in schedule()
  mp->p->park_futile = false;
  chain_link(mp->p);
  trace_ev(TraceEv::GStart, next);
  pi_sched_in(mp, next);   // as execute() does
  signal_apply(mp, next);  // as execute() does
}

// The G to hand off to directly, taken out of runnext; or nullptr.
static G* direct_next(M* mp, int64_t coarse_now) {
  P* pp = mp->p;
  if (!pp || mp->locks.load(std::memory_order_relaxed) != 0) return nullptr;
  if (pp->retired.load(std::memory_order_acquire)) return nullptr;  // schedule() retires it
  G* next = pp->runnext.load(std::memory_order_relaxed);
  if (!next) return nullptr;
  if (sched.runqsize.load(std::memory_order_relaxed) != 0) return nullptr;
  // schedule() would run a queued G first (runq_pick).
  if (pp->runqhead.load(std::memory_order_relaxed) != pp->runqtail.load(std::memory_order_relaxed) &&
      runq_chain_over(pp))
    return nullptr;
  int64_t when = timers_wake_time(&pp->timers);
  if (when != 0 && when <= coarse_now + kDirectTimerSlack) return nullptr;
  // The network is due for a look (schedule() polls first): a chain of
  // hand-offs must not keep fd events unseen (kBusyPollNs; the coarse
  // clock is behind nanotime by up to a tick, so this is late, never early).
  if (netpoll_due(coarse_now)) return nullptr;
  if (!pp->runnext.compare_exchange_strong(next, nullptr, std::memory_order_acquire))
    return nullptr;  // a thief took it
  return next;
}

// A G switching out while it runs on its alternate signal stack (inside a
// handler there) leaves a live frame on a stack its M keeps installed until
// the next G's signal_apply or the scheduler loop (signal_leave_altstack):
// no signal may be taken on this M until then (on user G). Never on the
// M's own signal stack (signal.cpp moves every frame that may switch).
static inline void leave_altstack_guard(M* mp) {
  GOSHIM_DCHECK(!signal_on_m_stack(mp, arch::get_sp()), "switching a G out on the M's signal stack");
  if (__builtin_expect(mp->cur_altstack.ss_sp != mp->sigstk.ss_sp, 0) &&
      !(mp->cur_altstack.ss_flags & SS_DISABLE) && signal_on_altstack(mp))
    signal_block_all(mp);
}

void park(bool (*unlockf)(G*, void*), void* arg, WaitReason reason, const void* obj) {
  GOSHIM_ON_USER_G();
  G* gp = getg();
  M* mp = gp->m;
  // At most the lock unlockf releases is held across the switch.
  GOSHIM_DCHECK(lock_rank_held() <= (unlockf ? 1 : 0), "park: holding a runtime lock");
  mp->waitunlockf = unlockf;
  mp->waitlock = arg;
  gp->waitreason = reason;
  gp->waitobj = obj;
  cputime_switch_tick(mp, gp);  // the run's end for its CPU time, before the switch
  int64_t now = sys::coarsetime();
  gp->waitsince = now;  // for dumps: the coarse clock is enough
  // A futile wait (sema_wait): the G it woke is in runnext; queued Gs
  // (the latch holder among them) go first (runq_chain_over).
  mp->p->park_futile = gp->park_futile;
  gp->park_futile = false;
  leave_altstack_guard(mp);
  if (G* next = direct_next(mp, now)) {
    trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Park, gp->waitobj);  // (on gp: its M known)
    goshim_switch(gp, next->sched_sp, next->tp, park_switch_post);
  } else
    goshim_mcall(gp, park_g0, mp->g0_sp, mp->g0.tp);
  gp->waitreason = WaitReason::None;
  gp->waitobj = nullptr;
  if (__builtin_expect(signal_has_pending(gp), 0)) signal_deliver(gp);
}

void ready(G* gp, bool next) {
  // Only the waker that took gp off its wait record may ready it, so a
  // check and a store do (no locked instruction on this hot path).
  GStatus s = gp->status.load(std::memory_order_acquire);
  if (s != GStatus::Waiting)
    fatalf("ready: G %lu is not waiting (status %u)", (unsigned long)gp->goid, (unsigned)s);
  gp->status.store(GStatus::Runnable, std::memory_order_release);
  trace_ev(TraceEv::GReady, gp, gp->goid);
  G* cur = getg();
  M* mp = cur ? cur->m : nullptr;
  if (mp && mp->p && !mp->p->retired.load(std::memory_order_relaxed)) {
    int32_t l = mp->locks.load(std::memory_order_relaxed);
    mp->locks.store(l + 1, std::memory_order_relaxed);  // only this M writes its locks
    runqput(mp->p, gp, next);
    mp->locks.store(l, std::memory_order_relaxed);
    // gp is the process's only goroutine (so the caller is its M's g0, in
    // the scheduler: a timer that fired, a netpoll result): this M runs it
    // next. Another M would find nothing (a lone program's every wake from
    // a sleep started a kernel thread).
    if (sched.ngoroutines.load(std::memory_order_seq_cst) <= 1) return;
  } else {
    globrunqput(gp);
  }
  wakep();
}

void ready_list(GQueue& q) {
  if (q.empty()) return;
  G* cur = getg();
  M* mp = cur ? cur->m : nullptr;
  uint64_t now = runq_stamp();
  for (G* gp = q.head; gp; gp = gp->schedlink) {
    gp->readyat = now;
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
  GOSHIM_ON_G0();
  G* gp = (G*)arg;
  M* mp = gp->m;
  signal_leave_altstack(mp);  // before gp is published (signal.hpp)
  trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Yield);
  cputime_out(gp, mp, mp->cw.sw_tick);  // its caller's tick
  gp->status.store(GStatus::Runnable, std::memory_order_release);
  mp->curg = nullptr;
  gp->m = nullptr;
  mcache_lend(gp);
  runqput(mp->p, gp, false);
  schedule();
}

// On g0: gp yields to the global queue.
static void gosched_global_g0(void* arg) {
  GOSHIM_ON_G0();
  G* gp = (G*)arg;
  M* mp = gp->m;
  signal_leave_altstack(mp);  // before gp is published (signal.hpp)
  trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Yield);  // no-op after a preemption's stop
  cputime_out(gp, mp, mp->cw.sw_tick);  // its caller's tick
  gp->status.store(GStatus::Runnable, std::memory_order_release);
  mp->curg = nullptr;
  gp->m = nullptr;
  mcache_lend(gp);
  globrunqput(gp);
  schedule();
}

bool gosched() {
  GOSHIM_ON_USER_G();
  GOSHIM_WITH_P();
  GOSHIM_NO_LOCKS("gosched");
  G* gp = getg();
  M* mp = gp->m;
  P* pp = mp->p;
  // Nothing else to run: a yield is a no-op, unless timers are due or the
  // network may have something (then the scheduler must look).
  if (runqempty(pp) && sched.runqsize.load(std::memory_order_relaxed) == 0 &&
      !netpoll_any_waiters()) {
    int64_t w = timers_wake_time(&pp->timers);
    if (w == 0 || w > sys::nanotime()) return false;
  }
  // Like Go's Gosched: to the global queue, so that the yielder runs after
  // everything runnable anywhere, on whichever P gets to it first.
  leave_altstack_guard(mp);
  cputime_switch_tick(mp, gp);  // the run's end (see park)
  goshim_mcall(gp, gosched_global_g0, mp->g0_sp, mp->g0.tp);
  if (__builtin_expect(signal_has_pending(gp), 0)) signal_deliver(gp);
  return true;
}

void gosched_local() {
  GOSHIM_ON_USER_G();
  GOSHIM_WITH_P();
  GOSHIM_NO_LOCKS("gosched_local");
  G* gp = getg();
  M* mp = gp->m;
  leave_altstack_guard(mp);
  cputime_switch_tick(mp, gp);  // the run's end (see park)
  goshim_mcall(gp, gosched_g0, mp->g0_sp, mp->g0.tp);
}

void gosched_global() {
  GOSHIM_ON_USER_G();
  GOSHIM_WITH_P();
  GOSHIM_NO_LOCKS("gosched_global");
  G* gp = getg();
  M* mp = gp->m;
  leave_altstack_guard(mp);
  cputime_switch_tick(mp, gp);  // the run's end (see park)
  goshim_mcall(gp, gosched_global_g0, mp->g0_sp, mp->g0.tp);
}

}  // namespace goshim
