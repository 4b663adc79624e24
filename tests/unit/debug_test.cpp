// The deadlock report's first question, all_asleep (core/debug.cpp), on
// the main G alone (no runtime started, so no arena slot exists): a G
// parked on a join with every P idle is asleep; the same G while an M
// still holds a P (say, on g0 finishing another G's exit, descheduled by
// the kernel before it wakes the joiner) is not; a timed wait never is.
#include <criterion/criterion.h>

#include "core/debug.hpp"
#include "core/gmp.hpp"
#include "core/proc.hpp"

using namespace goshim;

namespace {

void park_main(WaitReason why) {
  G* g = main_g();
  g->magic = kGMagic;
  g->waitreason = why;
  g->status.store(GStatus::Waiting, std::memory_order_release);
}

}  // namespace

Test(debug, all_asleep_when_every_p_is_idle) {
  sched.gomaxprocs = 2;
  sched.npidle.store(2);
  park_main(WaitReason::Join);
  cr_assert(all_asleep(), "a G parked on a join, every P idle: asleep");
}

Test(debug, not_asleep_while_an_m_holds_a_p) {
  sched.gomaxprocs = 2;
  sched.npidle.store(1);
  park_main(WaitReason::Join);
  cr_assert(!all_asleep(), "one P in use: some M is still doing something");
  sched.npidle.store(2);
  cr_assert(all_asleep());
}

Test(debug, not_asleep_in_a_sleep_or_while_running) {
  sched.gomaxprocs = 1;
  sched.npidle.store(1);
  park_main(WaitReason::Sleep);
  cr_assert(!all_asleep(), "a sleep ends by itself");
  park_main(WaitReason::Mutex);
  cr_assert(all_asleep());
  main_g()->status.store(GStatus::Running, std::memory_order_release);
  cr_assert(!all_asleep(), "a running G");
}
