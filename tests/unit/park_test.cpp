// park/ready races with real kernel threads: three threads play Ms (fake
// M and P each, on g0) running fake Gs, which park again and again on the
// one-shot wake token (core/gwait: what fd waits and sleeps park on) while
// another kernel thread (a foreign waker: ready() puts on the global
// queue) and the idle Ms (ready() puts on their P's runnext, which the
// other Ms steal) race to claim each wait: while the G is still arming,
// in the middle of its park, or after it. The parking side follows
// park_g0's order (the G leaves its M, status Waiting, then the unlockf
// commits the park); the Ms pick Gs with the scheduler's runq_pick and
// runqsteal. Checked: every wait is claimed exactly once and resumes its G
// exactly once (a lost wake-up leaves a G parked forever: the test then
// times out), a G never runs on two Ms at once (an owner word claimed with
// a CAS), ready() never sees a G that is not Waiting (it aborts), and a
// stale claim (an earlier wait's seq) never wakes a later wait.
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include <atomic>
#include <new>

#include "core/gmp.hpp"
#include "core/gwait.hpp"
#include "core/sched.hpp"

using namespace goshim;

namespace {

template <class T>
T* new_aligned() {
  return new (aligned_alloc(64, (sizeof(T) + 63) & ~size_t{63})) T();
}

constexpr int kNM = 3;      // Ms
constexpr int kNG = 6;      // Gs
constexpr int kIters = 20000; // parks per G

struct GState {
  G* g;
  std::atomic<M*> owner{nullptr};      // the M running it (claimed with a CAS)
  std::atomic<uint64_t> posted{0};     // the seq of its current wait, for the claimers
  int iter = 0;                        // waits done (touched only by its owner)
  bool in_wait = false;                // parked (or self-resumed): collect the reason first
  std::atomic<int> wins{0};            // claims won on its waits
  int resumed = 0;                     // resumptions seen by the G (owner only)
  int self_resumed = 0;                // claimed while arming: resumed without being readied
  int stale_seen = 0;
};

GState gs[kNG];
P* ps[kNM];
M* ms[kNM];
std::atomic<int> ndone{0};
std::atomic<long> nsteals{0}, nglobal_wins{0}, nm_wins{0};

[[noreturn]] void fail(const char* what, const GState* s) {
  fprintf(stderr, "park_test: %s (G %lu, wait %d)\n", what, (unsigned long)s->g->goid, s->iter);
  abort();
}

GState* state_of(G* gp) { return &gs[gp->goid - 1]; }

// Claims the posted waits it can. reason tells the claimers apart.
void claim_round(WakeReason why, std::atomic<long>* count) {
  for (GState& s : gs) {
    uint64_t seq = s.posted.load(std::memory_order_acquire);
    if (seq == 0) continue;
    if (gwait_claim(s.g, seq, why, nullptr)) {
      s.wins.fetch_add(1);
      count->fetch_add(1, std::memory_order_relaxed);
    }
  }
}

// Runs gp on mp until it parks (or finishes). As execute() + the G's code
// after its park returned + park()/park_g0.
void run(M* mp, G* gp, bool inherit) {
  GState* s = state_of(gp);
  for (;;) {
    if (gp->status.load(std::memory_order_acquire) != GStatus::Runnable)
      fail("picked a G that is not Runnable", s);
    M* none = nullptr;
    if (!s->owner.compare_exchange_strong(none, mp)) fail("G running on two Ms", s);
    gp->m = mp;
    gp->status.store(GStatus::Running, std::memory_order_relaxed);
    if (!inherit) mp->p->schedtick++;
    if (s->in_wait) {
      // gwait_park's return: the claim's reason, token back to Idle.
      uint64_t t = gp->wtoken.load(std::memory_order_acquire);
      WakeReason r = (WakeReason)((t >> 4) & 0xF);
      if (r != WakeReason::Ready && r != WakeReason::Timeout) fail("resumed unclaimed", s);
      if ((t >> 8) != gp->parkseq.load()) fail("resumed by another wait's claim", s);
      gp->wait_kind.store(WaitKind::None, std::memory_order_relaxed);
      gp->wtoken.store(t & ~(uint64_t)3, std::memory_order_relaxed);
      s->in_wait = false;
      s->resumed++;
      if (s->resumed != s->iter) fail("a wait resumed twice", s);
    }
    if (s->iter == kIters) {
      gp->status.store(GStatus::Dead, std::memory_order_relaxed);
      s->owner.store(nullptr);
      ndone.fetch_add(1);
      return;
    }
    s->iter++;
    // Arm on the G itself, publish the wait (as its records and timer).
    tls_g = gp;
    uint64_t seq = gwait_arm(gp, WaitKind::Sleep, false);
    tls_g = &mp->g0;
    // A claim of the previous wait arriving now must not touch this one.
    if (seq > 1 && gwait_claim(gp, seq - 1, WakeReason::Ready, nullptr)) fail("stale claim won", s);
    s->posted.store(seq, std::memory_order_release);
    s->in_wait = true;
    // Every 16th wait: hold the park until a claimer took it while the G
    // was still arming (a handshake, not a delay), so that the
    // claimed-before-park path is exercised every run.
    if (s->iter % 16 == 0)
      while ((gp->wtoken.load(std::memory_order_acquire) & 3) == 1) {
        claim_round(WakeReason::Timeout, &nm_wins);  // (this M may be the claimer)
        sched_yield();
      }
    // park_g0: the G leaves its M, then Waiting [S], then the unlockf.
    s->owner.store(nullptr, std::memory_order_release);
    gp->m = nullptr;
    gp->status.store(GStatus::Waiting, std::memory_order_release);
    if (gwait_commit(gp, mp)) return;  // parked: a claimer readies it
    // Claimed while arming: it resumes at once on this M (execute(gp, true)).
    s->self_resumed++;
    gp->status.store(GStatus::Runnable, std::memory_order_relaxed);
    inherit = true;
  }
}

void* m_main(void* arg) {
  M* mp = (M*)arg;
  P* pp = mp->p;
  tls_g = &mp->g0;
  while (ndone.load() < kNG) {
    bool inherit = false;
    G* gp = runq_pick(pp, &inherit);
    for (int i = 1; !gp && i < kNM; i++) {
      P* p2 = ps[(pp->id + i) % kNM];
      if ((gp = runqsteal(pp, p2, true))) nsteals.fetch_add(1, std::memory_order_relaxed);
    }
    if (gp) {
      run(mp, gp, inherit);
      continue;
    }
    claim_round(WakeReason::Timeout, &nm_wins);  // readies onto this P's runnext
    sched_yield();
  }
  return nullptr;
}

void* waker_main(void*) {
  tls_g = nullptr;  // a foreign kernel thread: ready() uses the global queue
  while (ndone.load() < kNG) {
    claim_round(WakeReason::Ready, &nglobal_wins);
    sched_yield();
  }
  return nullptr;
}

}  // namespace

TestSuite(park, .timeout = 300);

Test(park, ready_races_park_never_lost_never_twice) {
  sched.gomaxprocs = kNM;
  for (int i = 0; i < kNM; i++) {
    ps[i] = new_aligned<P>();
    ps[i]->id = i;
    ps[i]->status.store(PStatus::Running);
    timers_init(&ps[i]->timers);
    sched.allp[i].store(ps[i]);
    ms[i] = new_aligned<M>();
    ms[i]->id = i;
    ms[i]->g0.flags = kGFlagG0;
    ms[i]->g0.m = ms[i];
    ms[i]->p = ps[i];
    ps[i]->m = ms[i];
  }
  // The Gs start on the global queue.
  for (int i = 0; i < kNG; i++) {
    G* gp = new_aligned<G>();
    gp->goid = (uint64_t)i + 1;
    gp->magic = kGMagic;
    gp->status.store(GStatus::Runnable);
    gs[i].g = gp;
    globrunqput(gp);
  }
  pthread_t mt[kNM], wt;
  cr_assert_eq(pthread_create(&wt, nullptr, waker_main, nullptr), 0);
  for (int i = 0; i < kNM; i++) cr_assert_eq(pthread_create(&mt[i], nullptr, m_main, ms[i]), 0);
  for (int i = 0; i < kNM; i++) pthread_join(mt[i], nullptr);
  pthread_join(wt, nullptr);

  long wins = 0;
  int self = 0;
  for (GState& s : gs) {
    cr_assert_eq(s.iter, kIters);
    cr_assert_eq(s.wins.load(), kIters, "G %lu: %d claims won for %d waits",
                 (unsigned long)s.g->goid, s.wins.load(), kIters);
    cr_assert_eq(s.resumed, kIters, "G %lu resumed %d times", (unsigned long)s.g->goid, s.resumed);
    cr_assert_eq(s.g->status.load(), GStatus::Dead);
    cr_assert_geq(s.self_resumed, kIters / 16, "the claimed-while-arming path ran");
    wins += s.wins.load();
    self += s.self_resumed;
  }
  cr_assert_eq(wins, (long)kNG * kIters);
  cr_assert_eq(nglobal_wins.load() + nm_wins.load(), wins);
  cr_assert_eq(sched.runqsize.load(), 0);
  for (int i = 0; i < kNM; i++) cr_assert(runqempty(ps[i]));
  cr_log_info("waits %ld: readied by the foreign waker %ld, by idle Ms %ld; resumed while "
              "arming %d; steals %ld",
              wins, nglobal_wins.load(), nm_wins.load(), self, nsteals.load());
}
