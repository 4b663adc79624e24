// The scheduler loop (core/sched.cpp find_runnable) on a controlled state:
// fake Ps and Ms (this thread plays an M on g0 holding P0), fake Gs that
// never run. Asserts the order in which find_runnable takes work (due
// timers, runnext, the local queue, the global queue, and first every 61st
// tick, netpoll, stealing with its runnext rules) and the deadline it
// sleeps in netpoll with (the earliest timer of every P; a timer added
// meanwhile wakes it). Nothing here depends on timing: every expected G
// is already where the loop looks when it is called.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "core/fdtable.hpp"
#include "core/gmp.hpp"
#include "core/gwait.hpp"
#include "core/netpoll.hpp"
#include "core/sched.hpp"
#include "core/timer.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

template <class T>
T* new_aligned() {
  return new (aligned_alloc(64, (sizeof(T) + 63) & ~size_t{63})) T();
}

constexpr int kNP = 3;
P* ps[kNP];
M* ms[kNP];  // ms[i] owns ps[i]; ms[0] is the M under test

M* make_m(int id, P* pp) {
  M* mp = new_aligned<M>();
  mp->id = id;
  mp->rand = 0x9E3779B97F4A7C15ull * (uint64_t)(id + 1);
  mp->g0.flags = kGFlagG0;
  mp->g0.m = mp;
  mp->g0.status.store(GStatus::Running);
  mp->p = pp;
  pp->m = mp;
  // On allm, so that netpoll_any_waiters counts the Gs it parks.
  mp->alllink = sched.allm;
  sched.allm = mp;
  return mp;
}

void setup() {
  if (!netpoll_inited()) netpoll_init();
  sched.gomaxprocs = kNP;
  for (int i = 0; i < kNP; i++) {
    ps[i] = new_aligned<P>();
    ps[i]->id = i;
    ps[i]->status.store(PStatus::Running);
    ps[i]->schedtick = 1;  // not a multiple of 61
    timers_init(&ps[i]->timers);
    sched.allp[i].store(ps[i]);
  }
  for (int i = 0; i < kNP; i++) ms[i] = make_m(i, ps[i]);
  tls_g = &ms[0]->g0;  // this thread is ms[0], on g0
}

G* new_g(uint64_t id, GStatus st = GStatus::Runnable) {
  G* gp = new_aligned<G>();
  gp->goid = id;
  gp->magic = kGMagic;
  gp->status.store(st);
  return gp;
}

// One find_runnable, as schedule() runs it; the spinning state it leaves
// is undone as resetspinning would (without its wakep).
G* find(M* mp, bool* inherit = nullptr) {
  bool inh = false;
  G* gp = find_runnable(&inh);
  if (mp->spinning) {
    mp->spinning = false;
    sched.nmspinning.fetch_sub(1);
  }
  if (inherit) *inherit = inh;
  return gp;
}

// A fake G parked on the read side of pd (armed on itself, committed on
// its M's g0 as park's unlockf does).
void park_reader(G* gp, PollDesc* pd, M* mp) {
  gp->m = mp;
  gp->status.store(GStatus::Running);
  tls_g = gp;
  uint64_t seq = gwait_arm(gp, WaitKind::Netpoll, false);
  tls_g = &mp->g0;
  PollWaiter* w = &gp->pw;
  w->gp = gp;
  w->seq = seq;
  w->mode = kModeRead;
  {
    PdGuard g(pd->lock);
    pd_enqueue_locked(pd, w);
  }
  gp->m = nullptr;
  gp->status.store(GStatus::Waiting);
  cr_assert(gwait_commit(gp, mp));
}

// A non-blocking pipe in fds whose read end is registered with netpoll,
// n parked reading it (on ms[0]), and a byte written: n is ready once the
// network is polled. Returns the read end's descriptor (pd_put it).
PollDesc* pipe_with_reader(int fds[2], G* n) {
  cr_assert_eq(sys::raw2(SYS_pipe2, (long)fds, O_NONBLOCK), 0);
  int err = 0;
  PollDesc* pd = fd_get(fds[0], &err);
  cr_assert_not_null(pd);
  {
    PdGuard g(pd->lock);
    cr_assert_eq(pd_register_locked(pd), 0);
  }
  park_reader(n, pd, ms[0]);
  cr_assert_eq(sys::write(fds[1], "x", 1), 1);
  return pd;
}

// Timer callbacks: ready the G in arg on the P of the M running the timer.
void ready_cb(void* arg, uint64_t) { ready((G*)arg, true); }

}  // namespace

TestSuite(sched, .init = setup, .timeout = 60);

// Every source stocked at once: find_runnable drains them in the
// scheduler's order, one G per call.
Test(sched, order_runnext_local_global_steal_netpoll) {
  P* p0 = ps[0];
  G* r = new_g(1);
  G* l1 = new_g(2);
  G* l2 = new_g(3);
  G* g1 = new_g(4);
  G* g2 = new_g(5);
  G* s[4];
  for (int i = 0; i < 4; i++) s[i] = new_g(10 + i);
  runqput(p0, l1, false);
  runqput(p0, l2, false);
  runqput(p0, r, true);
  globrunqput(g1);
  globrunqput(g2);
  for (int i = 0; i < 4; i++) runqput(ps[1], s[i], false);

  // A G parked on a pipe that has data: netpoll(0) makes it ready.
  int fds[2];
  G* n = new_g(6, GStatus::Waiting);
  PollDesc* pd = pipe_with_reader(fds, n);
  cr_assert(netpoll_any_waiters());
  // The network was polled just now, and stays so for this test (a time
  // ahead of the clock): no poll is due while Gs are queued
  // (busy_poll_behind_queued has the other case).
  sched.lastpoll.store(sys::nanotime() + 3600 * 1000000000ll);

  bool inh;
  cr_assert_eq(find(ms[0], &inh), r, "runnext first");
  cr_assert(inh, "runnext inherits the time slice");
  cr_assert_eq(find(ms[0], &inh), l1, "then the local queue, in order");
  cr_assert(!inh);
  cr_assert_eq(find(ms[0]), l2);
  // Local queue empty: a fair share of the global queue (size/gomaxprocs
  // + 1: one of two with 3 Ps), oldest first.
  cr_assert_eq(find(ms[0]), g1, "then the global queue");
  cr_assert_eq(sched.runqsize.load(), 1);
  cr_assert_eq(find(ms[0]), g2);
  cr_assert_eq(sched.runqsize.load(), 0);
  // Nothing local or global: the Gs queued on another running P, half of
  // its ring at a time (the last one taken is run, the others land on
  // P0's queue), before the network: a P kept busy by its own polls must
  // not leave them waiting for their M's next time slice (bench/RESULTS.md).
  cr_assert(netpoll_any_waiters());
  cr_assert_eq(find(ms[0]), s[1], "then stealing from a running P");
  cr_assert_eq(runqlen(ps[1]), 2u, "half stolen");
  cr_assert_eq(runqlen(p0), 1u);
  cr_assert(netpoll_any_waiters(), "the network not polled while Gs were queued");
  cr_assert_eq(find(ms[0]), s[0]);
  cr_assert_eq(find(ms[0]), s[2]);
  cr_assert_eq(find(ms[0]), s[3]);
  cr_assert(runqempty(p0) && runqempty(ps[1]));
  // Last, the network.
  G* got = find(ms[0], &inh);
  cr_assert_eq(got, n, "then netpoll's G (got goid %lu)", got ? got->goid : 0ul);
  cr_assert(!inh);
  cr_assert_eq(n->status.load(), GStatus::Runnable);
  cr_assert(!netpoll_any_waiters());
  cr_assert_eq(sched.nmspinning.load(), 0);
  pd_put(pd);
  close(fds[0]);
  close(fds[1]);
}

// Gs queued and nobody has polled the network for kBusyPollNs: the loop
// polls first, and the G it readies runs after the queued ones.
Test(sched, busy_poll_behind_queued) {
  P* p0 = ps[0];
  G* l1 = new_g(2);
  G* l2 = new_g(3);
  runqput(p0, l1, false);
  runqput(p0, l2, false);
  int fds[2];
  G* n = new_g(6, GStatus::Waiting);
  PollDesc* pd = pipe_with_reader(fds, n);

  // Polled recently (a time ahead of the clock): not polled again.
  sched.lastpoll.store(sys::nanotime() + 3600 * 1000000000ll);
  cr_assert_eq(find(ms[0]), l1);
  cr_assert(netpoll_any_waiters(), "polled although the last poll was recent");
  cr_assert_eq(n->status.load(), GStatus::Waiting);

  // Not polled for longer than kBusyPollNs: polled before l2 runs, n
  // queued behind it.
  runqput(p0, l1, false);  // l1 ran and is queued again, behind l2
  int64_t before = sys::nanotime();
  sched.lastpoll.store(before - 2 * kBusyPollNs);
  cr_assert_eq(find(ms[0]), l2);
  cr_assert(!netpoll_any_waiters(), "the network not polled");
  cr_assert_eq(n->status.load(), GStatus::Runnable);
  cr_assert_geq(sched.lastpoll.load(), before, "the poll not recorded");
  cr_assert_eq(find(ms[0]), l1, "the readied G went ahead of older queued work");
  cr_assert_eq(find(ms[0]), n);
  cr_assert(runqempty(p0));
  cr_assert_eq(sched.runqsize.load(), 0);
  pd_put(pd);
  close(fds[0]);
  close(fds[1]);
}

// A busy poll also looks at the other Ps: one with queued Gs whose
// schedtick has not moved over the last two busy polls has not switched
// for that long (its M off the CPU, or its G computing), and this P, fed
// by the poller, never runs out of work to steal: half of its queue is
// taken, behind this P's own. A P that switched meanwhile keeps its queue.
Test(sched, busy_poll_steals_from_stalled_p) {
  P* p0 = ps[0];
  P* p1 = ps[1];
  G* l[4];
  G* s[4];
  for (int i = 0; i < 4; i++) {
    l[i] = new_g(10 + (uint64_t)i);
    runqput(p0, l[i], false);
  }
  for (int i = 0; i < 4; i++) {
    s[i] = new_g(20 + (uint64_t)i);
    runqput(p1, s[i], false);
  }
  int fds[2];
  G* n = new_g(6, GStatus::Waiting);
  PollDesc* pd = pipe_with_reader(fds, n);
  // w waits on a pipe left empty: the network has a waiter at every poll.
  int fds2[2];
  G* w = new_g(7, GStatus::Waiting);
  PollDesc* pd2 = pipe_with_reader(fds2, w);
  char c;
  cr_assert_eq(sys::read(fds2[0], &c, 1), 1);

  // First busy poll: p1 not looked at before, nothing taken.
  sched.lastpoll.store(sys::nanotime() - 2 * kBusyPollNs);
  cr_assert_eq(find(ms[0]), l[0]);
  cr_assert_eq(runqlen(p1), 4u, "taken from a P never looked at");
  cr_assert_eq(n->status.load(), GStatus::Runnable, "the network not polled");
  // p1 switched meanwhile: nothing taken.
  p1->schedtick++;
  sched.lastpoll.store(sys::nanotime() - 2 * kBusyPollNs);
  cr_assert_eq(find(ms[0]), l[1]);
  cr_assert_eq(runqlen(p1), 4u, "taken from a P that switched");
  // Polled again soon: p1 not looked at.
  sched.lastpoll.store(sys::nanotime() + 3600 * 1000000000ll);
  cr_assert_eq(find(ms[0]), l[2]);
  cr_assert_eq(runqlen(p1), 4u);
  // p1 still on the same tick at the next two busy polls (one look in a
  // row is not enough: a G may compute that long): half of its queue
  // joins p0's, behind p0's own older Gs.
  sched.lastpoll.store(sys::nanotime() - 2 * kBusyPollNs);
  cr_assert_eq(find(ms[0]), l[3]);
  cr_assert_eq(runqlen(p1), 4u, "taken after one look");
  sched.lastpoll.store(sys::nanotime() - 2 * kBusyPollNs);
  G* got = find(ms[0]);
  cr_assert_eq(got, n, "the stolen Gs went ahead of older ones (got goid %lu)", got ? got->goid : 0ul);
  cr_assert_eq(runqlen(p1), 2u, "not taken from a stalled P: half of its queue");
  sched.lastpoll.store(sys::nanotime() + 3600 * 1000000000ll);
  cr_assert_eq(find(ms[0]), s[0]);
  cr_assert_eq(find(ms[0]), s[1]);
  cr_assert(runqempty(p0));
  cr_assert_eq(w->status.load(), GStatus::Waiting);
  pd_put(pd);
  close(fds[0]);
  close(fds[1]);
  close(fds2[1]);
  (void)pd2;
}

// While another M is blocked in netpoll (lastpoll == 0) the loop does not
// poll: it steals instead; the network is polled again once nobody is.
Test(sched, no_netpoll_while_another_m_polls) {
  int fds[2];
  G* n = new_g(1, GStatus::Waiting);
  PollDesc* pd = pipe_with_reader(fds, n);
  G* s = new_g(2);
  runqput(ps[1], s, false);
  sched.lastpoll.store(0);  // an M sleeps in netpoll
  cr_assert_eq(find(ms[0]), s, "stolen, not polled");
  sched.lastpoll.store(1);
  cr_assert_eq(find(ms[0]), n);
  pd_put(pd);
  close(fds[0]);
  close(fds[1]);
}

// A chain of runnext hand-offs (runq_chain_over): runnext goes first
// while the chain is fresh, or when the G that left ran a slice of its
// own; queued Gs go first once the chain has held the P kRunnextChainNs,
// or at once after a futile park; runnext keeps its place meanwhile.
Test(sched, runnext_chain_yields_to_queued_gs) {
  P* p0 = ps[0];
  G* r = new_g(1);
  G* l = new_g(2);
  runqput(p0, l, false);
  runqput(p0, r, true);
  bool inh;
  // No chain (the G that left ran its own slice): runnext, even though
  // that slice is long over.
  p0->chain_len = 0;
  p0->chain_start = 0;
  p0->park_futile = false;
  cr_assert_eq(find(ms[0], &inh), r, "no chain: runnext first");
  cr_assert(inh);
  runqput(p0, r, true);
  // A chain that started just now: runnext.
  p0->chain_len = 5;
  p0->chain_start = sys::nanotime();
  cr_assert_eq(find(ms[0], &inh), r, "fresh chain: runnext first");
  runqput(p0, r, true);
  // The chain has held the P for kRunnextChainNs: the queued G first.
  p0->chain_start = sys::nanotime() - kRunnextChainNs;
  cr_assert_eq(find(ms[0], &inh), l, "old chain: the local queue first");
  cr_assert(!inh, "a queued G gets a slice of its own");
  cr_assert_eq(p0->runnext.load(), r, "runnext kept its place");
  // A futile park ends a fresh chain, and even no chain at all.
  runqput(p0, l, false);
  p0->chain_start = sys::nanotime();
  p0->park_futile = true;
  cr_assert_eq(find(ms[0]), l, "futile park: the local queue first");
  runqput(p0, l, false);
  p0->chain_len = 0;
  cr_assert_eq(find(ms[0]), l, "futile park without a chain: the local queue first");
  // Nothing queued: runnext whatever the chain.
  cr_assert_eq(find(ms[0], &inh), r, "queue empty: runnext");
  cr_assert(inh);
  p0->park_futile = false;
}

// Every 61st scheduler tick the global queue goes before runnext and the
// local queue (two Gs readying each other through runnext cannot starve
// it); on other ticks it comes after them.
Test(sched, global_queue_first_every_61_ticks) {
  P* p0 = ps[0];
  G* r = new_g(1);
  G* l = new_g(2);
  G* g = new_g(3);
  runqput(p0, l, false);
  runqput(p0, r, true);
  globrunqput(g);
  for (uint32_t tick : {1u, 60u, 62u, 121u}) {
    p0->schedtick = tick;
    cr_assert_eq(find(ms[0]), r, "tick %u: runnext first", tick);
    runqput(p0, r, true);  // back, as if it ran and was readied again
  }
  p0->schedtick = 122;  // 2 * 61
  bool inh;
  cr_assert_eq(find(ms[0], &inh), g, "tick 122: the global queue first");
  cr_assert(!inh);
  cr_assert_eq(runqlen(p0), 2u, "runnext and the local G untouched");
  p0->schedtick = 61;
  cr_assert_eq(find(ms[0]), r, "global queue empty: runnext");
  cr_assert_eq(find(ms[0]), l);
}

// The P's due timers run before its queues are looked at: a G a timer
// readies takes runnext (the old runnext goes to the tail).
Test(sched, due_timers_run_first) {
  P* p0 = ps[0];
  G* r = new_g(1);
  G* l = new_g(2);
  G* t = new_g(3, GStatus::Waiting);
  runqput(p0, l, false);
  runqput(p0, r, true);
  static Timer tm;
  tm.f = ready_cb;
  tm.arg = t;
  timer_add(&tm, 1);  // long due
  bool inh;
  cr_assert_eq(find(ms[0], &inh), t, "the timer's G first");
  cr_assert(inh);
  cr_assert_eq(find(ms[0]), l);
  cr_assert_eq(find(ms[0]), r, "the displaced runnext went to the tail");
  cr_assert_eq(timers_len(&p0->timers), 0);
  // A timer not due yet does not run.
  static Timer later;
  later.f = ready_cb;
  later.arg = t;
  t->status.store(GStatus::Waiting);
  timer_add(&later, sys::nanotime() + 3600LL * 1000 * 1000 * 1000);
  runqput(p0, l, false);
  cr_assert_eq(find(ms[0]), l);
  cr_assert_eq(timers_len(&p0->timers), 1);
  cr_assert(timer_del(&later));
}

// Stealing: from the ring first; a victim's runnext only when its ring is
// empty, on the last pass; a Running victim's runnext is taken too (after
// Go's short back-off), and the thief does not inherit its time slice.
Test(sched, steal_runnext_only_when_ring_empty) {
  P* p1 = ps[1];
  G* a = new_g(1);
  G* b = new_g(2);
  G* x = new_g(3);
  runqput(p1, a, false);
  runqput(p1, b, false);
  runqput(p1, x, true);
  bool inh;
  cr_assert_eq(find(ms[0], &inh), a, "the ring before runnext");
  cr_assert(!inh);
  cr_assert_eq(p1->runnext.load(), x);
  cr_assert_eq(find(ms[0]), b);
  cr_assert_eq(p1->runnext.load(), x, "runnext kept while the ring had Gs");
  cr_assert_eq(find(ms[0], &inh), x, "then runnext");
  cr_assert(!inh, "a stolen G starts a new time slice");
  cr_assert(runqempty(p1));
}

// On its last pass the thief runs a victim's due timers before it takes
// the victim's runnext: the G a timer readies lands on the thief's P and
// runs first.
Test(sched, steal_runs_victim_timers_before_its_runnext) {
  P* p1 = ps[1];
  G* x = new_g(1);
  G* t = new_g(2, GStatus::Waiting);
  runqput(p1, x, true);
  static Timer tm;
  tm.f = ready_cb;
  tm.arg = t;
  tls_g = &ms[1]->g0;  // added by P1's M
  timer_add(&tm, 1);
  tls_g = &ms[0]->g0;
  cr_assert_eq(find(ms[0]), t, "the victim's timer ran on the thief");
  cr_assert_eq(timers_len(&p1->timers), 0);
  cr_assert_eq(p1->runnext.load(), x, "its runnext not taken yet");
  cr_assert_eq(find(ms[0]), x);
}

// ---- netpoll deadline sharing ---------------------------------------------------

namespace {

struct Finder {
  M* mp;
  G* got;
};

void* finder_main(void* arg) {
  Finder* f = (Finder*)arg;
  tls_g = &f->mp->g0;
  f->got = find(f->mp);
  return nullptr;
}

// Waits until an M is blocked in netpoll with its deadline published
// (find_runnable stores lastpoll = 0, then pollUntil, then polls).
int64_t wait_poller() {
  for (;;) {
    if (sched.lastpoll.load() == 0) {
      int64_t u = sched.pollUntil.load();
      if (u != 0) return u;
    }
    sched_yield();
  }
}

// Nothing to run anywhere, timers on P0 (own) and P1 at the given times:
// the M gives up its P and sleeps in netpoll until the earliest; then P1's
// M adds a timer due now, which breaks the poller out, and the M (with a P
// again) runs that timer on its steal pass and the G it readies.
void poll_until_earliest(int64_t own, int64_t other) {
  static Timer t0, t1, now_t;
  t0.f = t1.f = ready_cb;
  t0.arg = t1.arg = nullptr;  // never fire
  timer_add(&t0, own);  // this thread is ms[0]: P0's heap
  tls_g = &ms[1]->g0;   // from here on this thread is P1's M
  timer_add(&t1, other);
  sched.npidle.store(0);
  sched.needspinning.store(0);  // (set by the adds' wakep: no idle P)
  Finder f{ms[0], nullptr};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, nullptr, finder_main, &f), 0);
  int64_t until = wait_poller();
  int64_t earliest = own < other ? own : other;
  cr_assert_eq(until, earliest, "netpoll sleeps until %ld, the earliest timer is %ld",
               (long)until, (long)earliest);
  cr_assert_eq(sched.npidle.load(), 1, "the poller gave its P up");
  // A timer due now on P1, added while the M sleeps: it must wake it.
  G* t = new_g(42, GStatus::Waiting);
  tls_g = &ms[1]->g0;
  now_t.f = ready_cb;
  now_t.arg = t;
  timer_add(&now_t, sys::nanotime());
  cr_assert_eq(pthread_join(th, nullptr), 0);
  cr_assert_eq(f.got, t, "the woken M ran the new timer's G");
  cr_assert_neq(sched.lastpoll.load(), 0);
  cr_assert_eq(sched.pollUntil.load(), 0);
  cr_assert_eq(ms[0]->p, ps[0], "the M has a P again");
  cr_assert_eq(sched.npidle.load(), 0);
  cr_assert(timer_del(&t0));
  cr_assert(timer_del(&t1));
}

constexpr int64_t kHour = 3600LL * 1000 * 1000 * 1000;

}  // namespace

Test(sched, netpoll_deadline_is_another_ps_earlier_timer) {
  int64_t now = sys::nanotime();
  poll_until_earliest(now + 2 * kHour, now + kHour);
}

Test(sched, netpoll_deadline_is_own_ps_earlier_timer) {
  int64_t now = sys::nanotime();
  poll_until_earliest(now + kHour, now + 2 * kHour);
}

// ---- stopm_until: the idle M that wakes for the next page purge ------------------

namespace {

struct Stopper {
  M* mp;
  int64_t deadline;
  bool got_p;
};

// Plays mp without a P: gives its P up and sleeps on the idle list.
void* stopper_main(void* arg) {
  Stopper* s = (Stopper*)arg;
  tls_g = &s->mp->g0;
  sched.lock.lock();
  pidleput(releasep());
  sched.lock.unlock();
  s->got_p = stopm_until(s->deadline);
  return nullptr;
}

bool on_midle(M* mp) {
  sched.lock.lock();
  bool on = false;
  for (M* m = sched.midle; m; m = m->schedlink) on |= m == mp;
  sched.lock.unlock();
  return on;
}

}  // namespace

// Nobody wants the M before its deadline: it wakes without a P and is no
// longer on the idle list (a later startm must not hand a P to an M that
// is busy purging).
Test(sched, stopm_until_deadline_leaves_idle_list) {
  Stopper s{ms[2], sys::nanotime() + 20 * 1000 * 1000, true};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, nullptr, stopper_main, &s), 0);
  cr_assert_eq(pthread_join(th, nullptr), 0);
  cr_assert(!s.got_p, "woken at the deadline, not handed a P");
  cr_assert_null(ms[2]->p);
  cr_assert(!on_midle(ms[2]), "still on the idle list after its deadline");
  cr_assert_eq(sched.nmidle, 0);
}

// Handed a P before its deadline: stopm_until returns as stopm does, with
// the P startm gave it.
Test(sched, stopm_until_startm_hands_a_p) {
  Stopper s{ms[2], sys::nanotime() + kHour, false};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, nullptr, stopper_main, &s), 0);
  while (!on_midle(ms[2])) sched_yield();
  sched.lock.lock();
  P* pp = pidleget();
  sched.lock.unlock();
  cr_assert_eq(pp, ps[2]);
  startm(pp, false);
  cr_assert_eq(pthread_join(th, nullptr), 0);
  cr_assert(s.got_p);
  cr_assert_eq(ms[2]->p, ps[2]);
  cr_assert(!on_midle(ms[2]));
}

namespace {

// The M under test in find_runnable_idle_m_takes_wakeps_p: held at the end
// of its way from giving its P up to stopm (test_hook_before_stopm) until
// the test lets it go on; the second time it gets there it stays.
std::atomic<M*> held_m{nullptr};
std::atomic<int> held_times{0};
std::atomic<bool> let_go{false};

void hold_before_stopm(M* mp) {
  if (mp != held_m.load()) return;
  int n = held_times.fetch_add(1) + 1;
  while (n > 1 || !let_go.load()) sched_yield();
}

void* idle_finder_main(void* arg) {
  M* mp = (M*)arg;
  tls_g = &mp->g0;
  bool inh = false;
  find_runnable(&inh);  // never returns: nothing to run
  return nullptr;
}

}  // namespace

// An M that has given its P up and is on its way to stopm is an idle M
// already: a wakep meanwhile (thread_create's, for a new G) hands it the
// P instead of starting another kernel thread beside it (newm). Under
// qemu-user that way can take milliseconds (the emulator's own locks),
// and the M:N processes had one kernel thread more than
// GOSHIM_MAXPROCS + 4 (issue 17). Go has the window too (stopm lists the
// M only after findRunnable's last checks).
Test(sched, find_runnable_idle_m_takes_wakeps_p) {
  M* mp = ms[2];
  held_m.store(mp);
  test_hook_before_stopm = hold_before_stopm;
  int32_t mcount = sched.mcount;
  pthread_t th;
  cr_assert_eq(pthread_create(&th, nullptr, idle_finder_main, mp), 0);
  while (held_times.load() < 1) sched_yield();
  // ms[2] found nothing and gave ps[2] up; it is not in stopm yet.
  cr_assert_null(mp->p);
  cr_assert_eq(sched.npidle.load(), 1);
  cr_assert_eq(sched.nmspinning.load(), 0);
  wakep();
  sched.lock.lock();
  P* handed = mp->nextp;
  bool spinning = mp->spinning;
  int32_t mcount_after = sched.mcount;
  sched.lock.unlock();
  cr_assert_eq(mcount_after, mcount, "wakep started a new M beside the idle one");
  cr_assert_eq(handed, ps[2], "the M on its way to stopm was not handed the P");
  cr_assert(spinning, "handed the P as the spinning M wakep wanted");
  cr_assert(!on_midle(mp));
  let_go.store(true);
  // It takes ps[2], spins, finds nothing, and gives ps[2] up again.
  while (held_times.load() < 2) sched_yield();
  cr_assert_null(mp->p);
  cr_assert_eq(sched.npidle.load(), 1);
  cr_assert_eq(sched.nmspinning.load(), 0);
  cr_assert_eq(sched.mcount, mcount);
}
