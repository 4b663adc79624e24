// The scheduler loop: Go's findRunnable with work stealing, spinning Ms and
// idle-M parking.
//
// Worker parking and unparking follow Go's protocol (proc.go, "Worker
// thread parking/unparking"): an extra M is woken (wakep) when work is
// submitted, there is an idle P and no M is spinning. A spinning M that
// finds work stops spinning and, if it was the last spinner, wakes another
// (resetspinning). The race between submitting work and the last spinner
// giving up is closed by the two patterns
//
//   submitter                         spinning M going idle
//   ---------                         ---------------------
//   put G on a run queue     [S]      nmspinning--              [S]
//   #StoreLoad (seq_cst)              #StoreLoad (seq_cst)
//   read nmspinning          [L]      re-check every run queue  [L]
//
// so at least one side sees the other. sched.needspinning covers the case
// where the submitter found no idle P while a non-spinning M is about to
// release its P.
//
// Unlike Go, an M that releases its P in find_runnable is on the idle list
// from that moment (M::listed_early, unlist_early_locked): a wakep in the
// meantime hands the P back to it rather than starting one more kernel
// thread, which the M:N promise (GOSHIM_MAXPROCS + a few) does not allow.
#include "core/contract.hpp"
#include "core/cputime.hpp"
#include "core/sched.hpp"
#include "core/scstore.hpp"
#include "core/signal.hpp"

#include <sys/mman.h>

#include <new>

#include "core/mcache.hpp"
#include "core/netpoll.hpp"
#include "core/pi.hpp"
#include "core/rawlog.hpp"
#include "core/real.hpp"
#include "core/timer.hpp"
#include "core/trace.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

Sched sched;

[[noreturn]] void execute_g(G* gp, bool inherit_time);  // park.cpp

// ---- idle lists (locks held: sched.lock) ------------------------------------

P* pidleget() {
  P* pp = sched.pidle;
  if (pp) {
    sched.pidle = pp->link;
    pp->link = nullptr;
    sched.npidle.fetch_sub(1, std::memory_order_seq_cst);
  }
  return pp;
}

// Like pidleget, but records that work was found that no P could take.
static P* pidleget_spinning() {
  P* pp = pidleget();
  if (!pp) sc_store(sched.needspinning, 1);
  return pp;
}

// Locks held: sched.lock. A retired P goes to the spare list instead of the
// idle list; its timers to the P that replaced it.
static void spare_put_locked(P* pp) {
  GOSHIM_LOCK_HELD(&sched.lock, "sched.lock");
  P* np = allp(pp->id);
  if (np != pp) timers_move(&pp->timers, &np->timers);
  pp->status.store(PStatus::Idle, std::memory_order_relaxed);
  pp->retired.store(false, std::memory_order_relaxed);
  pp->link = sched.pspare;
  sched.pspare = pp;
}

void pidleput(P* pp) {
  GOSHIM_CHECK(runqempty(pp), "pidleput: P has non-empty run queue");
  if (pp->retired.load(std::memory_order_acquire)) {
    spare_put_locked(pp);
    return;
  }
  pp->status.store(PStatus::Idle, std::memory_order_relaxed);
  pp->link = sched.pidle;
  sched.pidle = pp;
  sched.npidle.fetch_add(1, std::memory_order_seq_cst);
}

M* mget() {
  M* mp = sched.midle;
  if (mp) {
    sched.midle = mp->schedlink;
    mp->schedlink = nullptr;
    sched.nmidle--;
  }
  return mp;
}

void mput(M* mp) {
  mp->schedlink = sched.midle;
  sched.midle = mp;
  sched.nmidle++;
}

// ---- retired Ps ----------------------------------------------------------------

void retire_p(P* pp) {
  GOSHIM_WITHOUT_P();
  GOSHIM_CHECK(pp->m == nullptr, "retire_p: P still attached");
  GQueue q;
  bool inherit;
  while (G* gp = runqget(pp, &inherit)) q.push_back(gp);
  sched.lock.lock();
  if (!q.empty()) globrunqputbatch(q);
  spare_put_locked(pp);
  sched.lock.unlock();
  int64_t when = timers_wake_time(&allp(pp->id)->timers);
  if (when) wake_netpoller(when);
  wakep();
}

void pidle_drop_retired(P* pp) {
  sched.lock.lock();
  for (P** link = &sched.pidle; *link; link = &(*link)->link) {
    if (*link != pp) continue;
    *link = pp->link;
    pp->link = nullptr;
    sched.npidle.fetch_sub(1, std::memory_order_seq_cst);
    spare_put_locked(pp);
    break;
  }
  sched.lock.unlock();
}

P* spare_get() {
  sched.lock.lock();
  P* pp = sched.pspare;
  if (pp) sched.pspare = pp->link;
  sched.lock.unlock();
  if (pp) {
    pp->link = nullptr;
    return pp;
  }
  void* mem = sys::mmap(nullptr, sizeof(P), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
  if (mem == MAP_FAILED) return nullptr;
  pp = new (mem) P();
  timers_init(&pp->timers);
  return pp;
}

// ---- P ownership -----------------------------------------------------------

void acquirep(P* pp) {
  M* mp = getg()->m;
  GOSHIM_CHECK(mp->p == nullptr && pp->m == nullptr, "acquirep: P or M already attached");
  mp->p = pp;
  pp->m = mp;
  pp->status.store(PStatus::Running, std::memory_order_relaxed);
}

P* releasep() {
  M* mp = getg()->m;
  P* pp = mp->p;
  GOSHIM_CHECK(pp && pp->m == mp, "releasep: invalid P state");
  pp->m = nullptr;
  mp->p = nullptr;
  pp->status.store(PStatus::Idle, std::memory_order_relaxed);
  return pp;
}

// ---- spinning --------------------------------------------------------------

static void become_spinning(M* mp) {
  mp->spinning = true;
  sched.nmspinning.fetch_add(1, std::memory_order_seq_cst);
  sched.needspinning.store(0, std::memory_order_relaxed);
}

static void resetspinning(M* mp) {
  mp->spinning = false;
  int32_t n = sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst) - 1;
  GOSHIM_CHECK(n >= 0, "resetspinning: negative nmspinning");
  // More work may come after the G this M found. Not when that G is the
  // process's only one (a lone program's wake from its own sleep started
  // a kernel thread that found nothing): any other comes from a ready or a
  // creation, which wake an M themselves.
  if (sched.ngoroutines.load(std::memory_order_seq_cst) > 1) wakep();
}

void wakep() {
  // Be conservative: start a spinning M only if none exists.
  if (sched.nmspinning.load(std::memory_order_seq_cst) != 0) return;
  // Every P is busy: no M can be started. Record that work went unserved
  // (as pidleget_spinning would), so that an M about to give up its P
  // spins instead; without taking sched.lock on this hot path.
  if (sched.npidle.load(std::memory_order_seq_cst) == 0) {
    if (sched.needspinning.load(std::memory_order_relaxed) == 0)
      sc_store(sched.needspinning, 1);
    return;
  }
  int32_t zero = 0;
  if (!sched.nmspinning.compare_exchange_strong(zero, 1, std::memory_order_seq_cst)) return;
  sched.lock.lock();
  P* pp = pidleget_spinning();
  if (!pp) {
    sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst);
    sched.lock.unlock();
    return;
  }
  sched.lock.unlock();
  startm(pp, true);
}

void startm(P* pp, bool spinning) {
  sched.lock.lock();
  if (!pp) {
    GOSHIM_CHECK(!spinning, "startm: spinning without a P");
    pp = pidleget();
    if (!pp) {
      sched.lock.unlock();
      return;
    }
  }
  M* nmp = mget();
  if (!nmp) {
    sched.lock.unlock();
    newm(pp, spinning);
    return;
  }
  // Under sched.lock: an M listed early (find_runnable) that finds itself
  // off the list knows it has been handed a P.
  GOSHIM_CHECK(!nmp->spinning && !nmp->nextp, "startm: idle M in bad state");
  nmp->spinning = spinning;
  nmp->nextp = pp;
  sched.lock.unlock();
  nmp->park.wakeup();
}

void (*test_hook_before_stopm)(M* mp) = nullptr;

// The idle M that sleeps with a timeout for the next page purge (at most
// one; see find_runnable).
static std::atomic<M*> purge_sleeper{nullptr};

// On g0, without P: ends this M's kernel thread (it is a glibc thread).
[[noreturn]] static void mexit() {
  GOSHIM_ON_G0();
  GOSHIM_WITHOUT_P();
  M* mp = getg()->m;
  M* me = mp;
  purge_sleeper.compare_exchange_strong(me, nullptr, std::memory_order_release);
  cputime_m_exit(mp);
  mcache_destroy(mp);  // its cached objects go back to the arenas
  signal_m_stack_free(mp);
  mp->dead = true;
  sched.lock.lock();
  sched.mcount--;
  sched.lock.unlock();
  real::pthread_exit(nullptr);
  __builtin_unreachable();
}

void stopm() { stopm_until(0); }

// Takes mp off the idle list if it is still there. Under sched.lock.
static bool midle_remove(M* mp) {
  for (M** pm = &sched.midle; *pm; pm = &(*pm)->schedlink) {
    if (*pm == mp) {
      *pm = mp->schedlink;
      mp->schedlink = nullptr;
      sched.nmidle--;
      return true;
    }
  }
  return false;
}

// An M that gives its P up in find_runnable goes on the idle list at once
// (M::listed_early), not only when it reaches stopm: a wakep on its way
// there (a new G: thread_create) hands the P to it instead of starting a
// kernel thread beside it that would find the idle M's work gone (Go has
// that window: its findRunnable lists the M in stopm, after its last
// checks; under qemu-user that way took milliseconds behind the
// emulator's own locks, and a process had GOSHIM_MAXPROCS + 5 kernel
// threads). Before the M acts on its own (takes an idle P, sleeps in
// netpoll) it takes itself off the list; when it is no longer there,
// startm has handed it a P and it goes to stopm to take it. Sysmon never
// retires an M listed early (reap_idle_ms). Under sched.lock: true when
// mp is free to act on its own.
static bool unlist_early_locked(M* mp) {
  GOSHIM_LOCK_HELD(&sched.lock, "sched.lock");
  if (!mp->listed_early) return true;
  if (!midle_remove(mp)) return false;
  mp->listed_early = false;
  return true;
}

// Under sched.lock: an idle P for mp's own use, as pidleget_spinning;
// null with *taken set when mp, listed early, was handed one already.
static P* pidleget_unlisted(M* mp, bool* taken) {
  if (mp->listed_early) {
    if (!sched.pidle) return pidleget_spinning();
    if (!unlist_early_locked(mp)) {
      *taken = true;
      return nullptr;
    }
  }
  return pidleget_spinning();
}

bool stopm_until(int64_t deadline) {
  GOSHIM_ON_G0();
  GOSHIM_WITHOUT_P();
  GOSHIM_NO_LOCKS("stopm");
  M* mp = getg()->m;
  sched.lock.lock();
  // Listed early (find_runnable): on the list still, or taken off it by
  // startm, which set spinning and nextp for it; the note says which.
  GOSHIM_CHECK(mp->p == nullptr && (mp->listed_early || !mp->spinning),
               "stopm: M holds a P or spins");
  if (mp->listed_early)
    mp->listed_early = false;
  else
    mput(mp);
  sched.lock.unlock();
  pi_m_idle(mp);  // an inherited priority is not kept asleep (core/pi.hpp)
  mp->blocked = true;
  cputime_m_sleep(mp);  // the sleep is in no CPU time window
  signal_m_sleep(mp);
  if (deadline == 0) {
    mp->park.sleep();
  } else if (!mp->park.sleep_for(deadline - sys::nanotime())) {
    sched.lock.lock();
    bool taken = !midle_remove(mp);
    sched.lock.unlock();
    // Not on the list any more: startm (or sysmon's reaping) took this M
    // just now, and its wakeup follows.
    if (!taken) {
      mp->blocked = false;
      cputime_m_wake(mp);
      return false;
    }
    mp->park.sleep();
  }
  mp->park.clear();
  mp->blocked = false;
  cputime_m_wake(mp);
  if (mp->exit_requested) mexit();  // sysmon retires surplus idle Ms
  acquirep(mp->nextp);
  mp->nextp = nullptr;
  return true;
}

void handoffp(P* pp) {
  trace_ev(TraceEv::Handoff, nullptr, (uint64_t)pp->id);
  // Work to do: start an M right away.
  if (!runqempty(pp) || sched.runqsize.load(std::memory_order_relaxed) != 0) {
    startm(pp, false);
    return;
  }
  // No spinning or idle M: someone must look for work.
  if (sched.nmspinning.load(std::memory_order_seq_cst) + sched.npidle.load() == 0) {
    int32_t zero = 0;
    if (sched.nmspinning.compare_exchange_strong(zero, 1, std::memory_order_seq_cst)) {
      sched.needspinning.store(0, std::memory_order_relaxed);
      startm(pp, true);
      return;
    }
  }
  sched.lock.lock();
  if (sched.runq.size != 0) {
    sched.lock.unlock();
    startm(pp, false);
    return;
  }
  // The last running P, and nobody polls the network: an M must poll.
  if (sched.npidle.load() == sched.gomaxprocs - 1 &&
      sched.lastpoll.load(std::memory_order_relaxed) != 0) {
    sched.lock.unlock();
    startm(pp, false);
    return;
  }
  int64_t when = timers_wake_time(&pp->timers);
  pidleput(pp);
  sched.lock.unlock();
  if (when != 0) wake_netpoller(when);
}

void wake_netpoller(int64_t when) {
  if (sched.lastpoll.load(std::memory_order_seq_cst) == 0) {
    // An M is blocked in netpoll: break it out if it would sleep past when.
    int64_t until = sched.pollUntil.load(std::memory_order_seq_cst);
    if (until == 0 || until > when) netpoll_break();
  } else {
    wakep();
  }
}

// Readies netpoll results without a P: global queue, and an M per idle P.
static void inject_glist(GQueue& q) {
  if (q.empty()) return;
  uint64_t stamp = runq_stamp();
  for (G* gp = q.head; gp; gp = gp->schedlink) {
    gp->readyat = stamp;
    gp->status.store(GStatus::Runnable, std::memory_order_relaxed);
  }
  int32_t n = q.size;
  sched.lock.lock();
  globrunqputbatch(q);
  sched.lock.unlock();
  for (; n > 0; n--) {
    sched.lock.lock();
    P* pp = pidleget_spinning();
    sched.lock.unlock();
    if (!pp) break;
    startm(pp, false);
  }
}

// ---- stealing --------------------------------------------------------------

uint32_t fastrand() {
  M* mp = getg()->m;
  // xorshift64*
  uint64_t x = mp->rand;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  mp->rand = x;
  return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

static uint32_t gcd(uint32_t a, uint32_t b) {
  while (b) {
    uint32_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// Visits Ps in a random order: a random start and a random stride coprime
// with gomaxprocs (Go's randomOrder).
struct RandomOrder {
  uint32_t count, pos, inc, i;
  explicit RandomOrder(uint32_t n) : count(n), i(0) {
    pos = fastrand() % n;
    for (;;) {
      inc = fastrand() % n + 1;
      if (gcd(inc, n) == 1) break;
    }
  }
  bool done() const { return i == count; }
  void next() {
    i++;
    pos = (pos + inc) % count;
  }
};

// Steals a runnable G or runs due timers of other Ps. With a P.
static G* steal_work(int64_t* now, bool* inherit, int64_t* poll_until, bool* new_work) {
  M* mp = getg()->m;
  P* pp = mp->p;
  bool ran_timer = false;
  const int kTries = 4;
  *new_work = false;
  for (int i = 0; i < kTries; i++) {
    bool last = i == kTries - 1;
    for (RandomOrder e((uint32_t)sched.gomaxprocs); !e.done(); e.next()) {
      P* p2 = allp((int)e.pos);
      if (p2 == pp) continue;
      // Timers of p2, once, on the last pass (before stealing its runnext).
      if (last && timers_wake_time(&p2->timers) != 0) {
        int64_t w = 0;
        bool ran = timers_run(&p2->timers, now, &w);
        if (w != 0 && (*poll_until == 0 || w < *poll_until)) *poll_until = w;
        if (ran) {
          if (G* gp = runqget(pp, inherit)) return gp;
          ran_timer = true;
        }
      }
      if (p2->status.load(std::memory_order_relaxed) != PStatus::Idle) {
        if (G* gp = runqsteal(pp, p2, last)) {
          trace_ev(TraceEv::Steal, gp, (uint64_t)p2->id);
          *inherit = false;
          return gp;
        }
      }
    }
  }
  *new_work = ran_timer;
  return nullptr;
}

// One pass over the other running Ps' rings (not their runnext, which
// their own M runs next): half of the first non-empty one. With a P.
// Half of p2's ring (not its runnext) if p2 runs and has queued Gs. With pp.
static G* steal_ring(P* pp, P* p2) {
  if (p2->status.load(std::memory_order_relaxed) == PStatus::Idle) return nullptr;
  if (p2->runqhead.load(std::memory_order_relaxed) == p2->runqtail.load(std::memory_order_relaxed))
    return nullptr;
  G* gp = runqsteal(pp, p2, false);
  if (gp) trace_ev(TraceEv::Steal, gp, (uint64_t)p2->id);
  return gp;
}

static G* steal_queued(P* pp) {
  for (RandomOrder e((uint32_t)sched.gomaxprocs); !e.done(); e.next()) {
    P* p2 = allp((int)e.pos);
    if (p2 == pp) continue;
    if (G* gp = steal_ring(pp, p2)) return gp;
  }
  return nullptr;
}

// Without P: is there a P with local work? Returns an idle P to run it on.
// (mp listed early: see pidleget_unlisted.)
static P* check_runqs_noP(M* mp, bool* taken) {
  GOSHIM_WITHOUT_P();
  for (int i = 0; i < sched.gomaxprocs; i++) {
    P* p2 = allp(i);
    if (p2->status.load(std::memory_order_relaxed) != PStatus::Idle && !runqempty(p2)) {
      sched.lock.lock();
      P* pp = pidleget_unlisted(mp, taken);
      sched.lock.unlock();
      return pp;
    }
  }
  return nullptr;
}

static int64_t check_timers_noP(int64_t poll_until) {
  for (int i = 0; i < sched.gomaxprocs; i++) {
    int64_t w = timers_wake_time(&allp(i)->timers);
    if (w != 0 && (poll_until == 0 || w < poll_until)) poll_until = w;
  }
  return poll_until;
}

bool netpoll_due(int64_t now) {
  int64_t last = sched.lastpoll.load(std::memory_order_relaxed);
  // 0: an M is blocked in netpoll and sees events as they come.
  return last != 0 && now - last >= kBusyPollNs && netpoll_any_waiters();
}

bool netpoll_if_due(int64_t now) {
  int64_t last = sched.lastpoll.load(std::memory_order_relaxed);
  if (last == 0 || now - last < kBusyPollNs || !netpoll_any_waiters()) return false;
  if (sched.pollingNet.exchange(1, std::memory_order_acquire) != 0) return false;
  // Claims this round (an M about to block in netpoll swaps in 0 first:
  // then it polls, not we).
  if (!sched.lastpoll.compare_exchange_strong(last, now, std::memory_order_seq_cst)) {
    sched.pollingNet.store(0, std::memory_order_release);
    return false;
  }
  GQueue q;
  netpoll(0, q);
  sched.pollingNet.store(0, std::memory_order_release);
  if (q.empty()) return true;
  sched.npollbusy.fetch_add(q.size, std::memory_order_relaxed);
  // Stamped now: behind every G queued before, here or on the global
  // queue (runq_pick); one to each idle P, if any.
  ready_list(q);
  return true;
}

// After a busy poll (at most every kBusyPollNs): a P with queued Gs whose
// schedtick has not moved since the last such look has not switched for
// that long (its M is off the CPU, or its G computes): its queued Gs
// would wait for it while this P, kept busy by the poller, never runs out
// of work to steal. Takes half of them (at most kRunqSize / 2: only
// while this P's own ring is shorter than that, runqsteal's room).
static constexpr uint32_t kStallLooks = 2;
static G* steal_stalled(P* pp) {
  if (runqlen(pp) >= kRunqSize / 2) return nullptr;
  for (int i = 0; i < sched.gomaxprocs; i++) {
    P* p2 = allp(i);
    if (p2 == pp) continue;
    uint32_t t = __atomic_load_n(&p2->schedtick, __ATOMIC_RELAXED);
    uint32_t seen = __atomic_exchange_n(&p2->stall_seen_tick, t, __ATOMIC_RELAXED);
    if (t != seen) {
      __atomic_store_n(&p2->stall_looks, 0, __ATOMIC_RELAXED);
      continue;
    }
    if (__atomic_add_fetch(&p2->stall_looks, 1, __ATOMIC_RELAXED) < kStallLooks) continue;
    if (G* gp = steal_ring(pp, p2)) return gp;
  }
  return nullptr;
}

void share_slice_check() {
  G* gp = getg();
  M* mp = gp->m;
  P* pp = mp ? mp->p : nullptr;
  if (!pp) return;
  uint32_t t = __atomic_load_n(&pp->schedtick, __ATOMIC_RELAXED);
  if (pp->share_tick != t) {
    pp->share_tick = t;
    pp->share_since = 0;
  }
  if (pp->runqhead.load(std::memory_order_relaxed) == pp->runqtail.load(std::memory_order_relaxed) &&
      sched.runqsize.load(std::memory_order_relaxed) == 0)
    return;  // nobody waits (runnext is this slice's own hand-off)
  int64_t now = sys::nanotime();
  if (pp->share_since == 0) {
    pp->share_since = now;
    return;
  }
  if (now - pp->share_since >= kShareSliceNs) gp->preempt.store(true, std::memory_order_relaxed);
}

// Finds a runnable G; blocks (stopm or netpoll) until there is one. On g0.
G* find_runnable(bool* inherit) {
  GOSHIM_ON_G0();
  GOSHIM_WITH_P();
  M* mp = getg()->m;
  bool ran_g = true;  // called after a G ran (or the M started): see mcache_idle_purge
  int64_t purge_at = 0;
  bool was_spinning = false;
  bool taken = false;  // listed early and handed a P meanwhile
  int passes = 0;
top:
  passes++;
  m_progress(mp);
  P* pp = mp->p;
  *inherit = false;
  int64_t now = 0;  // read lazily: only timers need it
  int64_t poll_until = 0;
  timers_run(&pp->timers, &now, &poll_until);

  // Work queued here or globally: fd events would otherwise wait until a
  // P runs out of work, or for sysmon (kBusyPollNs). With nothing queued
  // the search below polls after older work on other Ps.
  if (!runqempty(pp) || sched.runqsize.load(std::memory_order_relaxed) != 0)
    if (netpoll_if_due(now != 0 ? now : sys::nanotime()))
      if (G* gp = steal_stalled(pp)) runqput(pp, gp, false);  // behind this P's older Gs

  if (G* gp = runq_pick(pp, inherit)) {
    // Found at once: this search's time goes to gp (execute reads no
    // counter; core/cputime.hpp).
    mp->cw.quick = passes == 1;
    return gp;
  }

  // Older work before newer: Gs already queued on another P before fresh
  // network events. Go polls first; but when that P's M is held off the CPU
  // by the kernel, a P whose own connections keep the poller busy never
  // got to steal, and the queued Gs waited for that M's next kernel time
  // slice (echo server at 100 connections under load: 57 ms while this
  // P ran 1,400 slices; bench/RESULTS.md).
  if (G* gp = steal_queued(pp)) {
    *inherit = false;
    return gp;
  }

  // Poll the network without blocking, if nobody is blocked in it already.
  if (netpoll_any_waiters() && sched.lastpoll.load(std::memory_order_relaxed) != 0 &&
      sched.pollingNet.exchange(1, std::memory_order_acquire) == 0) {
    GQueue q;
    netpoll(0, q);
    sched.pollingNet.store(0, std::memory_order_release);
    if (!q.empty()) {
      G* gp = q.pop();
      gp->status.store(GStatus::Runnable, std::memory_order_relaxed);
      ready_list(q);
      return gp;
    }
  }

  // Steal, with at most half of the busy Ps spinning.
  int32_t busy = sched.gomaxprocs - sched.npidle.load(std::memory_order_relaxed);
  if (mp->spinning || 2 * sched.nmspinning.load(std::memory_order_relaxed) < busy) {
    if (!mp->spinning) become_spinning(mp);
    bool new_work = false;
    int64_t w = 0;
    G* gp = steal_work(&now, inherit, &w, &new_work);
    if (gp) return gp;
    if (new_work) goto top;
    if (w != 0 && (poll_until == 0 || w < poll_until)) poll_until = w;
  }

  // Nothing to do: give up the P.
  sched.lock.lock();
  if (sched.runq.size != 0) {
    G* gp = globrunqget(pp, 0);
    sched.lock.unlock();
    return gp;
  }
  if (!mp->spinning && sched.needspinning.load(std::memory_order_seq_cst) == 1) {
    // Someone found work but no idle P: become the spinner it wanted.
    become_spinning(mp);
    sched.lock.unlock();
    goto top;
  }
  releasep();
  pidleput(pp);
  // On the idle list from here (unlist_early_locked): the spinning count
  // is dropped below, mp->spinning now (startm may set it from here on).
  was_spinning = mp->spinning;
  mp->spinning = false;
  mput(mp);
  mp->listed_early = true;
  sched.lock.unlock();

  {
    taken = false;
    if (was_spinning) {
      int32_t n = sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst) - 1;
      GOSHIM_CHECK(n >= 0, "find_runnable: negative nmspinning");
      // Re-check every source after dropping nmspinning (see the essay).
      sched.lock.lock();
      if (sched.runq.size != 0) {
        P* p2 = pidleget_unlisted(mp, &taken);
        if (p2) {
          acquirep(p2);
          G* gp = globrunqget(p2, 0);
          sched.lock.unlock();
          become_spinning(mp);
          return gp;
        }
      }
      sched.lock.unlock();
      if (!taken) {
        if (P* p2 = check_runqs_noP(mp, &taken)) {
          acquirep(p2);
          become_spinning(mp);
          goto top;
        }
      }
      poll_until = check_timers_noP(poll_until);
    }
    // Handed a P already: take it (stopm returns at once).
    if (taken) goto park;

  idle_nop:
    // Free pages back to the kernel while idle; wake up to go on with it.
    purge_at = mcache_idle_purge(ran_g);
    ran_g = false;

    // Sleep in netpoll until the earliest timer (or an fd event). Not for
    // the purge alone: an M in netpoll is not on the idle list, and the
    // next wakep would start a new kernel thread beside it. The M becomes
    // the poller (lastpoll 0) first and then takes itself off the idle
    // list; handed a P meanwhile, it gives the poller's place back and
    // takes the P. (Deciding the two on separate looks let an M sleep in
    // netpoll still listed: startm handed it a P it did not take, or
    // listed it twice, the list a cycle: "stopm: M holds a P or spins",
    // "startm: idle M in bad state", or a hang in midle_remove, a few
    // runs in a hundred of a program polling from many threads.)
    int64_t lastpoll_was = 0;
    if (netpoll_any_waiters() || poll_until != 0)
      lastpoll_was = sched.lastpoll.exchange(0, std::memory_order_seq_cst);
    if (lastpoll_was != 0) {
      sched.lock.lock();
      bool free = unlist_early_locked(mp);
      sched.lock.unlock();
      if (!free) {
        sc_store(sched.lastpoll, lastpoll_was);
        goto park;
      }
      if (purge_at != 0 && (poll_until == 0 || purge_at < poll_until)) poll_until = purge_at;
      sc_store(sched.pollUntil, poll_until);
      int64_t delay = -1;
      if (poll_until != 0) {
        delay = poll_until - sys::nanotime();
        if (delay < 0) delay = 0;
      }
      GQueue q;
      GOSHIM_DCHECK(!mp->listed_early, "find_runnable: M sleeps in netpoll still on the idle list");
      mp->blocked = true;
      if (delay != 0) signal_m_sleep(mp);
      cputime_m_sleep(mp);
      netpoll(delay, q);
      mp->blocked = false;
      cputime_m_wake(mp);
      now = sys::nanotime();
      sc_store(sched.pollUntil, 0);
      sc_store(sched.lastpoll, now);
      sched.lock.lock();
      P* p2 = pidleget();
      sched.lock.unlock();
      if (!p2) {
        bool none = q.empty();
        inject_glist(q);
        // Woken to return free pages and no P to be had (every P's
        // goroutine runs or sits in a blocking call): do it without one.
        if (none && mcache_purge_due()) {
          poll_until = check_timers_noP(0);
          goto idle_nop;
        }
      } else {
        acquirep(p2);
        if (!q.empty()) {
          G* gp = q.pop();
          gp->status.store(GStatus::Runnable, std::memory_order_relaxed);
          ready_list(q);
          return gp;
        }
        if (was_spinning) become_spinning(mp);
        goto top;
      }
    } else if (poll_until != 0) {
      int64_t until = sched.pollUntil.load(std::memory_order_seq_cst);
      if (until == 0 || until > poll_until) netpoll_break();
    }
  }
  // Idle on the list, where wakep finds this M; one of the idle Ms wakes
  // for the next purge, and goes on with it without a P.
park:
  if (__builtin_expect(test_hook_before_stopm != nullptr, 0)) test_hook_before_stopm(mp);
  M* none = nullptr;
  if (purge_at != 0 && purge_sleeper.compare_exchange_strong(none, mp, std::memory_order_acquire)) {
    bool got_p = stopm_until(purge_at);
    purge_sleeper.store(nullptr, std::memory_order_release);
    if (!got_p) {
      poll_until = check_timers_noP(0);
      was_spinning = false;
      goto idle_nop;
    }
  } else {
    stopm();
  }
  goto top;
}

void schedule() {
  M* mp = getg()->m;
  GOSHIM_CHECK(getg()->is_g0(), "schedule: not on g0");
  GOSHIM_CHECK(mp->locks.load(std::memory_order_relaxed) == 0, "schedule: holding locks");
  GOSHIM_NO_LOCKS("schedule");
  signal_leave_altstack(mp);
  m_progress(mp);
  if (__builtin_expect(mp->p->retired.load(std::memory_order_acquire), 0)) {
    // Sysmon gave this P's work to a replacement while this M was stuck in
    // the kernel. Retire it and find another P (or stop).
    if (mp->spinning) {
      mp->spinning = false;
      sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst);
    }
    retire_p(releasep());
    sched.lock.lock();
    P* pp = pidleget();
    sched.lock.unlock();
    if (pp)
      acquirep(pp);
    else
      stopm();
  }
  bool inherit = false;
  G* gp = find_runnable(&inherit);
  // A spinning M that found work wakes another spinner if it was the last.
  if (mp->spinning) resetspinning(mp);
  execute_g(gp, inherit);
}

}  // namespace goshim
