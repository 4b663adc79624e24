// The runtime's lock order: the only copy. HACKING.md and lock.hpp point
// here, and the debug build (make debug) checks it at every acquisition.
//
// A lock may be taken only while every lock the thread (the running G, or
// g0) holds has a LOWER order; two locks of a rank marked "address order"
// may nest when the second has the higher address (sema_requeue's two
// buckets, timers_move's two heaps). A leaf (order kLeafOrder) may be taken under anything, and
// nothing under a leaf. Every runtime lock is ranked where it is declared.
//
// No runtime lock is held across a park, a context switch, a call into the
// program or a malloc; in a Signal-safe section no Mutex is taken at all
// (both checked in the debug build: lock_rank_switch_ok, SignalSafeScope).
#pragma once

#include <stdint.h>

namespace goshim {

constexpr int kLeafOrder = 1000;

//  X(name, order, address-ordered nesting, what it is)
#define GOSHIM_LOCK_RANKS(X)                                                      \
  X(Unranked, 0, false, "an unranked lock")                                       \
  X(SemaBucket, 10, true, "sema bucket (core/sema.cpp)")                          \
  X(PollDesc, 15, false, "netpoll pollDesc (core/netpoll.hpp)")                   \
  X(Sched, 20, false, "sched.lock")                                               \
  X(Allm, 25, false, "sched.allmlock")                                            \
  X(Timers, 30, true, "P.timers.lock")                                           \
  X(GFree, kLeafOrder, false, "sched.gflock (leaf)")                              \
  X(StackPool, kLeafOrder, false, "stack pool_lock (leaf)")                       \
  X(TlsDlopen, kLeafOrder, false, "tls dlopen_lock (leaf)")                       \
  X(FdArena, kLeafOrder, false, "fd table arena_lock (leaf)")                     \
  X(TraceFile, kLeafOrder, false, "trace file_lock (leaf)")                       \
  X(Setxid, kLeafOrder, false, "setxid_lock (leaf)")                              \
  X(PreemptRanges, kLeafOrder, false, "preempt ranges_lock (leaf)")               \
  X(AttrDefault, kLeafOrder, false, "pthread attr default_lock (leaf)")           \
  X(SharedWatch, kLeafOrder, false, "sharedwatch wlock (leaf)")                  \
  X(Pi, kLeafOrder, false, "priority inheritance pi_lock (core/pi.cpp, leaf)")   \
  X(Leaf, kLeafOrder, false, "a leaf lock")

enum class LockRank : uint8_t {
#define GOSHIM_RANK_ENUM(name, order, addr, what) name,
  GOSHIM_LOCK_RANKS(GOSHIM_RANK_ENUM)
#undef GOSHIM_RANK_ENUM
};

int lock_rank_order(LockRank r);
const char* lock_rank_name(LockRank r);

// Whether `next` at address next_addr may be taken while `held` (at
// held_addr) is held. Pure: unit-tested in every build.
bool lock_rank_may_nest(LockRank held, const void* held_addr, LockRank next,
                        const void* next_addr);

// The locks one M (or one foreign kernel thread) holds, for the debug
// build's checker. Per M, not per TLS block: park's unlockf releases on g0
// a lock the G took.
struct LockRankHeld {
  struct Entry {
    LockRank rank = LockRank::Unranked;
    const void* addr = nullptr;
  };
  static constexpr int kMax = 16;
  Entry held[kMax];
  int n = 0;
};

#ifdef GOSHIM_DEBUG_BUILD
// Called by every ranked lock after acquiring / before releasing it.
// Aborts with both locks' names on an order violation, and on a Mutex
// taken in a Signal-safe section.
void lock_rank_acquire(LockRank r, const void* addr, bool is_mutex);
void lock_rank_release(LockRank r, const void* addr);
// Locks held by this M now; the fork child forgets them.
int lock_rank_held();
// Whether this M (or foreign thread) holds the ranked lock at addr.
bool lock_rank_holds(const void* addr);
void lock_rank_after_fork();
// Aborts if a runtime lock is held (before a park / context switch / call
// into the program).
void lock_rank_assert_none(const char* where);

// Marks a Signal-safe section (no Mutex may be taken inside). Counted per
// TLS block, so it follows a G that a handler switches out (preemption).
struct SignalSafeScope {
  SignalSafeScope();
  ~SignalSafeScope();
};
// Around a call into the program from inside a Signal-safe section (a
// program's signal handler): the program's code is outside the section,
// and a handler may leave by longjmp, skipping every destructor between
// (the section then ends where it jumps to: the program's code).
struct ProgramCallScope {
  ProgramCallScope();
  ~ProgramCallScope();
  int saved;
};
#else
inline void lock_rank_acquire(LockRank, const void*, bool) {}
inline void lock_rank_release(LockRank, const void*) {}
inline int lock_rank_held() { return 0; }
inline bool lock_rank_holds(const void*) { return true; }
inline void lock_rank_after_fork() {}
inline void lock_rank_assert_none(const char*) {}
struct SignalSafeScope {};
struct ProgramCallScope {};
#endif

}  // namespace goshim
