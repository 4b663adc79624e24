// Run queues with bare Ps and fake Gs (Go's RunSchedLocalQueueStealTest):
// the local ring under a concurrent owner and thieves, overflow to the
// global queue, global batch grabs and the 61-tick fairness check.
#include <criterion/criterion.h>
#include <pthread.h>

#include <atomic>
#include <new>

#include "core/gmp.hpp"
#include "core/sched.hpp"

using namespace goshim;

namespace {

constexpr int kG = 4096;
G* gs;

void setup() {
  sched.gomaxprocs = 4;
  gs = (G*)aligned_alloc(64, (sizeof(G) * kG + 63) & ~size_t{63});
  for (int i = 0; i < kG; i++) {
    new (&gs[i]) G();
    gs[i].goid = (uint64_t)i;
  }
}

void teardown() { free(gs); }

P* new_p() {
  P* pp = (P*)aligned_alloc(64, (sizeof(P) + 63) & ~size_t{63});
  new (pp) P();
  pp->status.store(PStatus::Running);
  return pp;
}

void drain_global() {
  sched.lock.lock();
  while (sched.runq.pop()) {
  }
  sched.runqsize.store(0);
  sched.lock.unlock();
}

}  // namespace

TestSuite(runq, .init = setup, .fini = teardown, .timeout = 60);

Test(runq, fifo_and_runnext) {
  P* pp = new_p();
  bool inherit;
  cr_assert(runqempty(pp));
  for (int i = 0; i < 10; i++) runqput(pp, &gs[i], false);
  runqput(pp, &gs[100], true);
  cr_assert_eq(runqlen(pp), 11);
  cr_assert_eq(runqget(pp, &inherit), &gs[100], "runnext first");
  cr_assert(inherit, "runnext inherits the time slice");
  for (int i = 0; i < 10; i++) {
    cr_assert_eq(runqget(pp, &inherit), &gs[i]);
    cr_assert(!inherit);
  }
  cr_assert_null(runqget(pp, &inherit));
  // A new runnext kicks the old one to the tail.
  runqput(pp, &gs[1], true);
  runqput(pp, &gs[2], true);
  cr_assert_eq(runqget(pp, &inherit), &gs[2]);
  cr_assert_eq(runqget(pp, &inherit), &gs[1]);
  cr_assert(runqempty(pp));
}

Test(runq, overflow_moves_half_to_global) {
  P* pp = new_p();
  drain_global();
  for (int i = 0; i < (int)kRunqSize; i++) runqput(pp, &gs[i], false);
  cr_assert_eq(sched.runqsize.load(), 0);
  runqput(pp, &gs[kRunqSize], false);  // full: half + this one go global
  cr_assert_eq(sched.runqsize.load(), (int)kRunqSize / 2 + 1);
  cr_assert_eq(runqlen(pp), kRunqSize / 2);
  // Order is kept: the oldest half is first in the global queue.
  sched.lock.lock();
  G* first = sched.runq.head;
  sched.lock.unlock();
  cr_assert_eq(first, &gs[0]);
  drain_global();
}

Test(runq, steal_half) {
  P* victim = new_p();
  P* thief = new_p();
  for (int i = 0; i < 100; i++) runqput(victim, &gs[i], false);
  G* gp = runqsteal(thief, victim, false);
  cr_assert_not_null(gp);
  cr_assert_eq(runqlen(thief) + 1, 50u, "took half");
  cr_assert_eq(runqlen(victim), 50u);
  // runnext is only stolen on request, and only when the ring is empty.
  P* v2 = new_p();
  runqput(v2, &gs[200], true);
  cr_assert_null(runqsteal(thief, v2, false));
  v2->status.store(PStatus::Idle);  // no back-off sleep
  cr_assert_eq(runqsteal(thief, v2, true), &gs[200]);
}

// Owner pushes and pops while thieves steal: every G is taken exactly once.
namespace {
struct Shared {
  P* owner;
  P* thieves[3];
  std::atomic<int> taken[kG];
  std::atomic<bool> done{false};
  std::atomic<int> total{0};
};

void take(Shared* s, G* gp) {
  int id = (int)gp->goid;
  int prev = s->taken[id].fetch_add(1);
  if (prev != 0) abort();  // duplicate
  s->total.fetch_add(1);
}

void* thief_main(void* arg) {
  Shared* s = (Shared*)((void**)arg)[0];
  P* me = (P*)((void**)arg)[1];
  bool inherit;
  while (!s->done.load() || !runqempty(s->owner)) {
    if (G* gp = runqsteal(me, s->owner, true)) {
      take(s, gp);
      while (G* g2 = runqget(me, &inherit)) take(s, g2);
    }
  }
  return nullptr;
}
}  // namespace

Test(runq, concurrent_owner_and_thieves) {
  static Shared s;
  s.owner = new_p();
  s.owner->status.store(PStatus::Idle);  // thieves need not back off on runnext
  for (int i = 0; i < kG; i++) s.taken[i].store(0);
  s.done.store(false);
  s.total.store(0);
  drain_global();
  pthread_t th[3];
  void* args[3][2];
  for (int i = 0; i < 3; i++) {
    s.thieves[i] = new_p();
    args[i][0] = &s;
    args[i][1] = s.thieves[i];
    pthread_create(&th[i], nullptr, thief_main, args[i]);
  }
  bool inherit;
  unsigned seed = 12345;
  int next = 0;
  while (next < kG) {
    int batch = 1 + (int)(rand_r(&seed) % 64);
    for (int i = 0; i < batch && next < kG; i++, next++) {
      runqput(s.owner, &gs[next], next % 7 == 0);
      if (next % 3 == 0)
        if (G* gp = runqget(s.owner, &inherit)) take(&s, gp);
    }
  }
  while (G* gp = runqget(s.owner, &inherit)) take(&s, gp);
  s.done.store(true);
  for (int i = 0; i < 3; i++) pthread_join(th[i], nullptr);
  // Anything that overflowed went to the global queue.
  sched.lock.lock();
  while (G* gp = sched.runq.pop()) take(&s, gp);
  sched.runqsize.store(0);
  sched.lock.unlock();
  cr_assert_eq(s.total.load(), kG, "every G taken exactly once (%d of %d)", s.total.load(), kG);
  for (int i = 0; i < kG; i++) cr_assert_eq(s.taken[i].load(), 1, "G %d taken %d times", i,
                                           s.taken[i].load());
}

Test(runq, global_batch_grab) {
  P* pp = new_p();
  drain_global();
  sched.gomaxprocs = 4;
  GQueue q;
  for (int i = 0; i < 100; i++) q.push_back(&gs[i]);
  sched.lock.lock();
  globrunqputbatch(q);
  // A fair share: size/gomaxprocs + 1 = 26; one returned, 25 local.
  G* gp = globrunqget(pp, 0);
  sched.lock.unlock();
  cr_assert_eq(gp, &gs[0]);
  cr_assert_eq(runqlen(pp), 25u);
  cr_assert_eq(sched.runqsize.load(), 74);
  // max caps the batch.
  bool inherit;
  while (runqget(pp, &inherit)) {
  }
  sched.lock.lock();
  gp = globrunqget(pp, 1);
  sched.lock.unlock();
  cr_assert_eq(gp, &gs[26]);
  cr_assert(runqempty(pp));
  drain_global();
}

// Two Gs that keep readying each other through runnext would own the P
// forever; every 61st tick the global queue goes first.
Test(runq, fairness_61_ticks) {
  P* pp = new_p();
  drain_global();
  sched.gomaxprocs = 1;
  globrunqput(&gs[500]);
  bool inherit;
  int ticks_until_global = -1;
  G* a = &gs[1];
  G* b = &gs[2];
  runqput(pp, a, true);
  for (int tick = 1; tick <= 200; tick++) {
    pp->schedtick = (uint32_t)tick;
    G* gp = runq_pick(pp, &inherit);
    cr_assert_not_null(gp);
    if (gp == &gs[500]) {
      ticks_until_global = tick;
      break;
    }
    // gp runs and readies the other one into runnext, then parks.
    runqput(pp, gp == a ? b : a, true);
  }
  cr_assert_eq(ticks_until_global, 61, "global G ran at tick %d", ticks_until_global);
  while (runqget(pp, &inherit)) {
  }
  sched.gomaxprocs = 4;
}

// A P whose ring never runs dry (its own network polls and wakes refill
// it) must not leave the global queue to the 61-tick check: runq_pick
// takes whichever head became runnable first (G::readyat).
Test(runq, older_global_before_ring) {
  P* pp = new_p();
  drain_global();
  sched.gomaxprocs = 1;
  bool inherit;
  globrunqput(&gs[600]);              // runnable first, on the global queue
  for (int i = 0; i < 3; i++) runqput(pp, &gs[610 + i], false);  // then here
  globrunqput(&gs[601]);              // runnable last
  pp->schedtick = 1;                  // not a 61st tick
  cr_assert_eq(runq_pick(pp, &inherit), &gs[600], "the older global G first");
  pp->schedtick = 2;
  cr_assert_eq(runq_pick(pp, &inherit), &gs[610], "then the ring, older than gs[601]");
  // A ring that keeps being refilled: each pick readies a new G here.
  G* got[8];
  int n = 0;
  for (int tick = 3; n < 8; tick++) {
    pp->schedtick = (uint32_t)tick;
    runqput(pp, &gs[620 + tick], false);
    got[n++] = runq_pick(pp, &inherit);
  }
  cr_assert_eq(got[0], &gs[611]);
  cr_assert_eq(got[1], &gs[612]);
  cr_assert_eq(got[2], &gs[601], "the global G once the older ring Gs ran, not at tick 61");
  while (runqget(pp, &inherit)) {
  }
  drain_global();
  sched.gomaxprocs = 4;
}

// Gs moved between the queues keep their place in time: a batch taken
// from the global queue into an empty ring, and half of a full ring moved
// to the global queue.
Test(runq, moves_keep_stamps) {
  P* pp = new_p();
  drain_global();
  sched.gomaxprocs = 1;
  bool inherit;
  for (int i = 0; i < 4; i++) globrunqput(&gs[700 + i]);
  uint64_t before[4];
  for (int i = 0; i < 4; i++) before[i] = gs[700 + i].readyat;
  pp->schedtick = 1;
  cr_assert_eq(runq_pick(pp, &inherit), &gs[700]);  // the ring was empty: a batch
  for (int i = 1; i < 4; i++) cr_assert_eq(gs[700 + i].readyat, before[i], "G %d restamped", i);
  // A newer global G stays behind the batch.
  globrunqput(&gs[710]);
  for (int i = 1; i < 4; i++) {
    pp->schedtick = (uint32_t)(1 + i);
    cr_assert_eq(runq_pick(pp, &inherit), &gs[700 + i]);
  }
  pp->schedtick = 5;
  cr_assert_eq(runq_pick(pp, &inherit), &gs[710]);
  cr_assert(runqempty(pp));
  drain_global();
  sched.gomaxprocs = 4;
}
