// The lock-order table (core/lockrank.hpp): which nestings are allowed,
// and, in the debug build, that the checker aborts on a violation.
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>

#include <type_traits>

#include "core/contract.hpp"
#include "core/lock.hpp"
#include "core/lockrank.hpp"

using namespace goshim;

Test(lockrank, documented_order) {
  int a = 0, b = 0;
  // sema bucket < pollDesc < sched.lock < allm < P.timers < leaves
  cr_expect(lock_rank_may_nest(LockRank::SemaBucket, &a, LockRank::Timers, &b));
  cr_expect(lock_rank_may_nest(LockRank::Sched, &a, LockRank::Timers, &b));
  cr_expect(lock_rank_may_nest(LockRank::Sched, &a, LockRank::Allm, &b));
  cr_expect(lock_rank_may_nest(LockRank::Sched, &a, LockRank::GFree, &b));
  cr_expect(!lock_rank_may_nest(LockRank::Timers, &a, LockRank::Sched, &b));
  cr_expect(!lock_rank_may_nest(LockRank::Sched, &a, LockRank::SemaBucket, &b));
  cr_expect(!lock_rank_may_nest(LockRank::Sched, &a, LockRank::Sched, &b));
}

Test(lockrank, nothing_under_a_leaf) {
  int a = 0, b = 0;
  cr_expect(!lock_rank_may_nest(LockRank::StackPool, &a, LockRank::GFree, &b));
  cr_expect(!lock_rank_may_nest(LockRank::FdArena, &a, LockRank::Sched, &b));
  cr_expect(!lock_rank_may_nest(LockRank::GFree, &a, LockRank::GFree, &b));
}

Test(lockrank, buckets_nest_in_address_order) {
  int x[2];
  cr_expect(lock_rank_may_nest(LockRank::SemaBucket, &x[0], LockRank::SemaBucket, &x[1]));
  cr_expect(!lock_rank_may_nest(LockRank::SemaBucket, &x[1], LockRank::SemaBucket, &x[0]));
  cr_expect(!lock_rank_may_nest(LockRank::SemaBucket, &x[0], LockRank::SemaBucket, &x[0]));
  // timers_move locks two heaps in address order
  cr_expect(lock_rank_may_nest(LockRank::Timers, &x[0], LockRank::Timers, &x[1]));
  cr_expect(!lock_rank_may_nest(LockRank::Timers, &x[1], LockRank::Timers, &x[0]));
  cr_expect(!lock_rank_may_nest(LockRank::Sched, &x[0], LockRank::Sched, &x[1]));
}

// Every Mutex has a rank: one declared (or re-created after fork) without
// one would escape the order check.
static_assert(!std::is_default_constructible_v<Mutex>);

Test(lockrank, names) {
  cr_expect_str_eq(lock_rank_name(LockRank::Sched), "sched.lock");
  cr_expect_eq(lock_rank_order(LockRank::GFree), kLeafOrder);
}

#ifdef GOSHIM_DEBUG_BUILD
Test(lockrank, checker_allows_the_order) {
  Mutex s{LockRank::Sched}, t{LockRank::Timers};
  s.lock();
  t.lock();
  cr_expect_eq(lock_rank_held(), 2);
  t.unlock();
  s.unlock();
  cr_expect_eq(lock_rank_held(), 0);
}

Test(lockrank, checker_aborts_out_of_order, .signal = SIGABRT) {
  Mutex s{LockRank::Sched}, t{LockRank::Timers};
  t.lock();
  s.lock();  // fatal: SIGABRT, with both names on stderr
}

Test(lockrank, checker_aborts_on_mutex_in_signal_safe_section, .signal = SIGABRT) {
  Mutex s{LockRank::Sched};
  SignalSafeScope scope;
  s.lock();
}

// GOSHIM_LOCK_HELD ("Locks held: X") sees exactly the locks this thread holds.
Test(lockrank, lock_held_contract) {
  Mutex s{LockRank::Sched}, t{LockRank::Timers};
  s.lock();
  cr_expect(lock_rank_holds(&s));
  cr_expect(!lock_rank_holds(&t));
  GOSHIM_LOCK_HELD(&s, "s");
  s.unlock();
  cr_expect(!lock_rank_holds(&s));
}

// A thread without an M (each of these) keeps its set in an entry of a
// table it gives back once it holds nothing: more threads than the table
// has entries (1024) take and release locks one after another, some
// concurrently, each seeing only its own locks.
namespace {
Mutex foreign_a{LockRank::Sched}, foreign_b{LockRank::Timers};
void* foreign_locker(void*) {
  for (int i = 0; i < 4; i++) {
    cr_expect_eq(lock_rank_held(), 0);
    foreign_a.lock();
    foreign_b.lock();
    cr_expect_eq(lock_rank_held(), 2);
    cr_expect(lock_rank_holds(&foreign_a) && lock_rank_holds(&foreign_b));
    foreign_b.unlock();
    foreign_a.unlock();
    cr_expect(!lock_rank_holds(&foreign_a));
  }
  return nullptr;
}
}  // namespace

Test(lockrank, foreign_threads_give_their_set_back) {
  for (int round = 0; round < 700; round++) {
    pthread_t t[4];
    for (auto& x : t) cr_assert_eq(pthread_create(&x, nullptr, foreign_locker, nullptr), 0);
    for (auto& x : t) cr_assert_eq(pthread_join(x, nullptr), 0);
  }
  cr_expect_eq(lock_rank_held(), 0);
}

Test(lockrank, lock_held_contract_aborts, .signal = SIGABRT) {
  Mutex s{LockRank::Sched};
  GOSHIM_LOCK_HELD(&s, "s");  // fatal: not held
}
#endif
