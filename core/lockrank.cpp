// The lock-order table and the debug build's checker (see lockrank.hpp).
#include "core/lockrank.hpp"

#include <atomic>

#include "arch/arch.hpp"
#include "core/dump.hpp"
#include "core/gmp.hpp"
#include "core/rawlog.hpp"

namespace goshim {

namespace {

struct RankInfo {
  int order;
  bool addr_ordered;
  const char* name;
};

constexpr RankInfo kRanks[] = {
#define GOSHIM_RANK_INFO(name, order, addr, what) {order, addr, what},
    GOSHIM_LOCK_RANKS(GOSHIM_RANK_INFO)
#undef GOSHIM_RANK_INFO
};

}  // namespace

int lock_rank_order(LockRank r) { return kRanks[(int)r].order; }
const char* lock_rank_name(LockRank r) { return kRanks[(int)r].name; }

bool lock_rank_may_nest(LockRank held, const void* held_addr, LockRank next,
                        const void* next_addr) {
  if (held == LockRank::Unranked || next == LockRank::Unranked) return true;
  int h = lock_rank_order(held), n = lock_rank_order(next);
  if (h >= kLeafOrder) return false;  // nothing under a leaf
  if (h < n) return true;
  return held == next && kRanks[(int)held].addr_ordered && held_addr < next_addr;
}

#ifdef GOSHIM_DEBUG_BUILD

namespace {

// A thread without an M (a foreign kernel thread, code running before
// init) keeps its set in an entry of this table, claimed while it holds a
// runtime lock. Not in __thread: every goroutine's TLS block carries each
// of goshim's __thread variables, and a 264-byte set there moved an idle
// goroutine's stack top into the page below the TLS block's (the debug
// build's idle_mem: 12,018 resident bytes per idle thread instead of the
// release build's 9,318). Eight bytes of TLS point at the entry.
struct ForeignSet {
  std::atomic<uintptr_t> owner{0};  // the thread pointer of the thread using it; 0: free
  LockRankHeld h;
};
constexpr int kForeignSets = 1024;
ForeignSet foreign_sets[kForeignSets];
LockRankHeld no_locks;  // what a thread without an entry holds (never written)
__thread ForeignSet* foreign_cur;
__thread int signal_safe_depth;  // per TLS block: follows the G

// Where the violation happened, then the fatal error.
[[noreturn]] void violation(const char* fmt, LockRank a, const void* pa, LockRank b,
                            const void* pb) {
  dump_backtrace_here(2, 1);
  fatalf(fmt, lock_rank_name(a), pa, lock_rank_name(b), pb);
}

// This M's set, or this foreign thread's (an empty one if it holds none).
LockRankHeld& cur() {
  G* gp = getg();
  if (gp && gp->m) return gp->m->lockranks;
  ForeignSet* f = foreign_cur;
  return f ? f->h : no_locks;
}

// The set a lock about to be recorded goes into: a foreign thread's first
// lock claims a free entry. (A signal handler running between the claim
// and the store of foreign_cur claims one of its own, and frees it when it
// holds nothing again.)
LockRankHeld& cur_for_acquire() {
  G* gp = getg();
  if (gp && gp->m) return gp->m->lockranks;
  if (ForeignSet* f = foreign_cur) return f->h;
  uintptr_t me = arch::get_tp();
  int start = (int)((me >> 6) % kForeignSets);
  for (int i = 0; i < kForeignSets; i++) {
    ForeignSet* f = &foreign_sets[(start + i) % kForeignSets];
    uintptr_t free = 0;
    if (f->owner.load(std::memory_order_relaxed) == 0 &&
        f->owner.compare_exchange_strong(free, me, std::memory_order_acquire)) {
      f->h.n = 0;
      foreign_cur = f;
      return f->h;
    }
  }
  fatalf("lock order: more than %d threads without an M hold runtime locks at once",
         kForeignSets);
}

// After a release: a foreign thread that holds nothing gives its entry back.
void foreign_release_if_empty() {
  G* gp = getg();
  if (gp && gp->m) return;
  ForeignSet* f = foreign_cur;
  if (!f || f->h.n != 0) return;
  foreign_cur = nullptr;  // first: a handler arriving now claims its own
  f->owner.store(0, std::memory_order_release);
}

}  // namespace

void lock_rank_acquire(LockRank r, const void* addr, bool is_mutex) {
  if (is_mutex && signal_safe_depth > 0) {
    dump_backtrace_here(2, 0);
    fatalf("lock order: %s (%p) taken in a Signal-safe section", lock_rank_name(r), addr);
  }
  LockRankHeld& h = cur_for_acquire();
  for (int i = 0; i < h.n; i++)
    if (!lock_rank_may_nest(h.held[i].rank, h.held[i].addr, r, addr))
      violation("lock order: taking %s (%p) while holding %s (%p)", r, addr, h.held[i].rank,
                h.held[i].addr);
  if (h.n == LockRankHeld::kMax) fatalf("lock order: more than %d locks held", h.n);
  h.held[h.n++] = {r, addr};
}

void lock_rank_release(LockRank r, const void* addr) {
  LockRankHeld& h = cur();
  for (int i = h.n - 1; i >= 0; i--) {
    if (h.held[i].addr != addr) continue;
    for (int j = i; j + 1 < h.n; j++) h.held[j] = h.held[j + 1];
    h.n--;
    foreign_release_if_empty();
    return;
  }
  fatalf("lock order: releasing %s (%p), which this M does not hold", lock_rank_name(r),
         addr);
}

int lock_rank_held() { return cur().n; }
bool lock_rank_holds(const void* addr) {
  LockRankHeld& h = cur();
  for (int i = 0; i < h.n; i++)
    if (h.held[i].addr == addr) return true;
  return false;
}
// In the fork child: this thread holds nothing, and the other threads,
// with their foreign entries, are gone.
void lock_rank_after_fork() {
  G* gp = getg();
  if (gp && gp->m) gp->m->lockranks.n = 0;
  foreign_cur = nullptr;
  for (ForeignSet& f : foreign_sets)
    if (f.owner.load(std::memory_order_relaxed) != 0) f.owner.store(0, std::memory_order_relaxed);
}

void lock_rank_assert_none(const char* where) {
  LockRankHeld& h = cur();
  if (h.n > 0)
    fatalf("%s while holding %s (%p)", where, lock_rank_name(h.held[h.n - 1].rank),
           h.held[h.n - 1].addr);
}

SignalSafeScope::SignalSafeScope() { signal_safe_depth++; }
SignalSafeScope::~SignalSafeScope() { signal_safe_depth--; }
ProgramCallScope::ProgramCallScope() : saved(signal_safe_depth) { signal_safe_depth = 0; }
ProgramCallScope::~ProgramCallScope() { signal_safe_depth = saved; }

#endif

}  // namespace goshim
