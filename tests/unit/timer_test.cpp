// Per-P 4-ary timer heaps: ordering, deletion from the middle, stale
// firings, 100,000 timers at O(log n) each, and the timer deadline shared
// with the netpoller (an earlier timer breaks a sleeping poller).
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <new>

#include "core/gmp.hpp"
#include "core/timer.hpp"
#include "core/netpoll.hpp"
#include "core/sched.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

P* pp;
M* mp;

void setup() {
  // A fake M holding a P, as the scheduler would have: timer_add uses the
  // current M's P.
  pp = new (aligned_alloc(64, (sizeof(P) + 63) & ~size_t{63})) P();
  mp = new (aligned_alloc(64, (sizeof(M) + 63) & ~size_t{63})) M();
  mp->p = pp;
  mp->g0.m = mp;
  mp->g0.flags = kGFlagG0;
  tls_g = &mp->g0;
  timers_init(&pp->timers);
  sched.gomaxprocs = 1;
  sched.allp[0].store(pp);
}

// timers_run with a given time.
bool run_at(int64_t now, int64_t* next) { return timers_run(&pp->timers, &now, next); }

int64_t fired[200000];
int nfired;

void record(void* arg, uint64_t seq) { fired[nfired++] = (int64_t)(intptr_t)arg; }

}  // namespace

TestSuite(timer, .init = setup, .timeout = 120);

Test(timer, fires_in_deadline_order) {
  static Timer t[1000];
  nfired = 0;
  unsigned seed = 7;
  for (int i = 0; i < 1000; i++) {
    t[i].f = record;
    t[i].arg = (void*)(intptr_t)i;
    timer_add(&t[i], 1000 + (int64_t)(rand_r(&seed) % 100000));
  }
  cr_assert_eq(timers_len(&pp->timers), 1000);
  int64_t next;
  cr_assert(run_at(INT64_MAX / 2, &next));
  cr_assert_eq(nfired, 1000);
  cr_assert_eq(next, 0);
  for (int i = 1; i < 1000; i++)
    cr_assert_leq(t[fired[i - 1]].when, t[fired[i]].when, "out of order at %d", i);
}

Test(timer, only_due_timers_run) {
  static Timer t[10];
  nfired = 0;
  for (int i = 0; i < 10; i++) {
    t[i].f = record;
    t[i].arg = (void*)(intptr_t)i;
    timer_add(&t[i], 100 * (i + 1));
  }
  int64_t next;
  run_at(550, &next);
  cr_assert_eq(nfired, 5);
  cr_assert_eq(next, 600);
  cr_assert_eq(timers_wake_time(&pp->timers), 600);
  run_at(10000, &next);
  cr_assert_eq(nfired, 10);
  cr_assert_eq(timers_wake_time(&pp->timers), 0);
}

Test(timer, delete_anywhere) {
  static Timer t[500];
  nfired = 0;
  for (int i = 0; i < 500; i++) {
    t[i].f = record;
    t[i].arg = (void*)(intptr_t)i;
    timer_add(&t[i], 1000 + (i * 7919) % 500);
  }
  for (int i = 0; i < 500; i += 3) cr_assert(timer_del(&t[i]));
  for (int i = 0; i < 500; i += 3) cr_assert(!timer_del(&t[i]), "second delete");
  int64_t next;
  run_at(INT64_MAX / 2, &next);
  cr_assert_eq(nfired, 500 - 167);
  for (int i = 0; i < nfired; i++) cr_assert_neq(fired[i] % 3, 0, "deleted timer fired");
  for (int i = 1; i < nfired; i++) cr_assert_leq(t[fired[i - 1]].when, t[fired[i]].when);
  cr_assert(!timer_del(&t[1]), "fired timers are not in the heap");
}

// A timer reused right after it fired must not be confused with the old
// firing: the callback gets the seq captured when it was popped.
namespace {
uint64_t seen_seq;
void seqrec(void*, uint64_t seq) { seen_seq = seq; }
}  // namespace

Test(timer, seq_travels_with_the_firing) {
  static Timer t;
  t.f = seqrec;
  t.seq = 1;
  timer_add(&t, 10);
  int64_t next;
  run_at(20, &next);
  cr_assert_eq(seen_seq, 1u);
  t.seq = 2;
  timer_add(&t, 30);
  cr_assert(timer_del(&t));
  run_at(100, &next);
  cr_assert_eq(seen_seq, 1u, "deleted timer fired");
}

// The heap invariant on the 4-ary layout (parent of i at (i - 1) / 4) and
// every entry's idx pointing back at it.
static void check_heap() {
  TimerHeap* h = &pp->timers;
  for (int32_t i = 0; i < h->len; i++) {
    cr_assert_eq(h->ents[i].t->idx, i, "entry %d: idx %d", i, h->ents[i].t->idx);
    cr_assert_eq(h->ents[i].t->heap.load(), h);
    if (i > 0) cr_assert_leq(h->ents[(i - 1) / 4].when, h->ents[i].when, "heap order at %d", i);
  }
}

// Each add, delete and pop moves at most a few entries per level of the
// heap (counted on sampled operations: entries whose idx changed), and the
// heap stays a 4-ary heap. An O(n) operation would move thousands.
Test(timer, hundred_thousand_timers_log_n) {
  const int n = 100000;
  static Timer t[n];
  static int32_t idx0[n];
  nfired = 0;
  unsigned seed = 99;
  // Levels of a 4-ary heap of n entries, and the most entries one add,
  // delete or pop may move (sift up or down: one per level, plus the last
  // entry moved into a hole).
  int levels = 1;
  for (long cap = 1, w = 1; cap < n; levels++) w *= 4, cap += w;
  const int max_moved = 2 * levels + 2;
  int worst = 0, sampled = 0;
  auto moved_by = [&](auto op, Timer* self) {
    for (int i = 0; i < n; i++) idx0[i] = t[i].idx;
    op();
    int moved = 0;
    for (int i = 0; i < n; i++)
      if (&t[i] != self && idx0[i] >= 0 && t[i].idx >= 0 && t[i].idx != idx0[i]) moved++;
    if (moved > worst) worst = moved;
    sampled++;
    return moved;
  };
  for (int i = 0; i < n; i++) {
    t[i].f = record;
    t[i].arg = (void*)(intptr_t)i;
    int64_t when = 1 + (int64_t)(rand_r(&seed) % 1000000000);
    if (i % 997 == 0 && i > 0) {
      // Every other sampled add has the earliest deadline: it travels all
      // the way up, the worst case.
      if (i % 2) when = 1;
      int m = moved_by([&] { timer_add(&t[i], when); }, &t[i]);
      cr_assert_leq(m, max_moved, "add moved %d entries of %d", m, i);
    } else {
      timer_add(&t[i], when);
    }
  }
  cr_assert_eq(timers_len(&pp->timers), n);
  check_heap();
  for (int i = 0; i < n; i += 2) {
    if (i % 1001 == 0) {
      int m = moved_by([&] { cr_assert(timer_del(&t[i])); }, &t[i]);
      cr_assert_leq(m, max_moved, "delete moved %d entries", m);
    } else {
      cr_assert(timer_del(&t[i]));
    }
  }
  check_heap();
  cr_assert_eq(timers_len(&pp->timers), n / 2);
  // Pop the earliest ones one at a time.
  for (int k = 0; k < 200; k++) {
    int before = nfired;
    int64_t next;
    int m = moved_by([&] { run_at(timers_wake_time(&pp->timers), &next); }, nullptr);
    cr_assert_geq(nfired, before + 1);
    cr_assert_leq(m, max_moved * (nfired - before), "pop moved %d entries", m);
  }
  check_heap();
  int64_t next;
  run_at(INT64_MAX / 2, &next);
  cr_assert_eq(nfired, n / 2);
  cr_assert_eq(timers_len(&pp->timers), 0);
  for (int i = 1; i < nfired; i++) cr_assert_leq(t[fired[i - 1]].when, t[fired[i]].when);
  cr_assert_gt(sampled, 300);
  cr_assert_gt(worst, 0, "the sampled operations moved nothing: the check sees nothing");
}

// The M about to sleep waits in netpoll until the earliest timer; a timer
// added with an earlier deadline breaks it out (wake_netpoller ->
// netpoll_break on the eventfd), a later one does not.
namespace {
std::atomic<int> poller_done;
void* poller(void*) {
  GQueue q;
  netpoll(-1, q);  // blocks until an fd event or netpoll_break
  poller_done.store(1);
  return nullptr;
}
}  // namespace

Test(timer, earlier_timer_breaks_a_sleeping_poller) {
  if (!netpoll_inited()) netpoll_init();
  // As find_runnable sets them before it blocks in netpoll.
  int64_t now = sys::nanotime();
  int64_t until = now + 3600LL * 1000 * 1000 * 1000;
  sched.lastpoll.store(0);
  sched.pollUntil.store(until);
  poller_done.store(0);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, nullptr, poller, nullptr), 0);
  // A timer later than the poller's deadline leaves it asleep.
  static Timer late, early;
  late.f = record;
  timer_add(&late, until + 1000);
  usleep(100 * 1000);
  cr_assert_eq(poller_done.load(), 0, "a later timer woke the poller");
  // An earlier one wakes it (if it did not, the test times out).
  early.f = record;
  timer_add(&early, now + 1000 * 1000 * 1000);
  cr_assert_eq(pthread_join(th, nullptr), 0);
  cr_assert_eq(poller_done.load(), 1);
  timer_del(&late);
  timer_del(&early);
  sched.lastpoll.store(1);
  sched.pollUntil.store(0);
}

// netpoll_break wakes a poller blocked without a deadline, once: the break
// is consumed, and a break sent before the poller blocks is not lost.
Test(timer, netpoll_break_wakes_once) {
  if (!netpoll_inited()) netpoll_init();
  poller_done.store(0);
  netpoll_break();  // before the poller sleeps
  pthread_t th;
  cr_assert_eq(pthread_create(&th, nullptr, poller, nullptr), 0);
  cr_assert_eq(pthread_join(th, nullptr), 0);
  poller_done.store(0);
  cr_assert_eq(pthread_create(&th, nullptr, poller, nullptr), 0);
  usleep(100 * 1000);
  cr_assert_eq(poller_done.load(), 0, "the first break was not consumed");
  netpoll_break();
  netpoll_break();  // idempotent until the sleeper wakes
  cr_assert_eq(pthread_join(th, nullptr), 0);
  cr_assert_eq(poller_done.load(), 1);
  // Both breaks were one: nothing is left pending for the next poller.
  GQueue q;
  netpoll(0, q);
  poller_done.store(0);
  cr_assert_eq(pthread_create(&th, nullptr, poller, nullptr), 0);
  usleep(100 * 1000);
  cr_assert_eq(poller_done.load(), 0, "a second break was left pending");
  netpoll_break();
  cr_assert_eq(pthread_join(th, nullptr), 0);
}
