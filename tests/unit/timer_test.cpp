// Per-P 4-ary timer heaps: ordering, deletion from the middle, stale
// firings, and 100,000 timers at O(log n) each.
#include <criterion/criterion.h>
#include <stdlib.h>

#include <new>

#include "core/gmp.hpp"
#include "core/timer.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

P* pp;
M* mp;

void setup() {
  // A fake M holding a P, as the scheduler would have: timer_add uses the
  // current M's P.
  pp = new (aligned_alloc(64, sizeof(P))) P();
  mp = new (aligned_alloc(64, sizeof(M))) M();
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

Test(timer, hundred_thousand_timers_log_n) {
  const int n = 100000;
  static Timer t[n];
  nfired = 0;
  unsigned seed = 99;
  int64_t t0 = sys::nanotime();
  for (int i = 0; i < n; i++) {
    t[i].f = record;
    t[i].arg = (void*)(intptr_t)i;
    timer_add(&t[i], 1 + (int64_t)(rand_r(&seed) % 1000000000));
  }
  for (int i = 0; i < n; i += 2) timer_del(&t[i]);
  int64_t next;
  run_at(INT64_MAX / 2, &next);
  int64_t dt = sys::nanotime() - t0;
  cr_assert_eq(nfired, n / 2);
  for (int i = 1; i < nfired; i++) cr_assert_leq(t[fired[i - 1]].when, t[fired[i]].when);
  // 100,000 adds, 50,000 deletes and 50,000 pops: O(n log n) stays far
  // below a second here; an O(n) heap operation would take minutes.
  cr_assert_lt(dt, 5LL * 1000 * 1000 * 1000, "took %ld ns", (long)dt);
}
