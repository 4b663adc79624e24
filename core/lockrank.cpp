// The lock-order table and the debug build's checker (see lockrank.hpp).
#include "core/lockrank.hpp"

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

__thread LockRankHeld foreign_set;
__thread int signal_safe_depth;  // per TLS block: follows the G

// Where the violation happened, then the fatal error.
[[noreturn]] void violation(const char* fmt, LockRank a, const void* pa, LockRank b,
                            const void* pb) {
  dump_backtrace_here(2, 1);
  fatalf(fmt, lock_rank_name(a), pa, lock_rank_name(b), pb);
}

LockRankHeld& cur() {
  G* gp = getg();
  if (gp && gp->m) return gp->m->lockranks;
  return foreign_set;
}

}  // namespace

void lock_rank_acquire(LockRank r, const void* addr, bool is_mutex) {
  LockRankHeld& h = cur();
  if (is_mutex && signal_safe_depth > 0) {
    dump_backtrace_here(2, 0);
    fatalf("lock order: %s (%p) taken in a Signal-safe section", lock_rank_name(r), addr);
  }
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
void lock_rank_after_fork() { cur().n = 0; }

void lock_rank_assert_none(const char* where) {
  LockRankHeld& h = cur();
  if (h.n > 0)
    fatalf("%s while holding %s (%p)", where, lock_rank_name(h.held[h.n - 1].rank),
           h.held[h.n - 1].addr);
}

SignalSafeScope::SignalSafeScope() { signal_safe_depth++; }
SignalSafeScope::~SignalSafeScope() { signal_safe_depth--; }

#endif

}  // namespace goshim
