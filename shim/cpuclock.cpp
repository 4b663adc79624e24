// Per-thread CPU clocks of goroutines: clock_gettime/clock_getres on
// CLOCK_THREAD_CPUTIME_ID and on the clock pthread_getcpuclockid gives for
// a goroutine, and getrusage(RUSAGE_THREAD). A goroutine's CPU time is
// accounted by core/cputime from the start (its Ms' kernel-thread CPU time
// divided by cycle-counter run time); every other clock goes to glibc
// untouched.
#include <errno.h>
#include <sys/resource.h>
#include <time.h>

#include "core/cputime.hpp"
#include "core/proc.hpp"
#include "shim/shim.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

// Linux's encoding of CPU clocks (negative ids): bits 0-1 the kind
// (0 PROF, 1 VIRT, 2 SCHED, 3 an fd clock), bit 2 per-thread, the rest
// ~pid. A goroutine's clock carries its virtual tid (never a kernel tid).
constexpr int kPerThread = 4;

// The G whose thread clock clk is, or null (not a goroutine's clock, or
// the caller is not a goroutine). *bad: a goroutine clock whose G is gone.
G* clock_g(clockid_t clk, bool* bad) {
  *bad = false;
  if (clk == CLOCK_THREAD_CPUTIME_ID) return shim::user_g();
  if (clk >= 0 || (clk & 3) == 3 || !(clk & kPerThread)) return nullptr;
  int32_t tid = ~(clk >> 3);
  if (tid == 0) return shim::user_g();  // the calling thread
  if (!mn_active() || !is_virtual_tid(tid)) return nullptr;
  G* gp = g_from_vtid(tid);
  if (!gp || gp->status.load(std::memory_order_acquire) == GStatus::Idle) *bad = true;
  return gp;
}

}  // namespace

GOSHIM_EXPORT int clock_gettime(clockid_t clk, struct timespec* ts) {
  if (__builtin_expect(clk >= 0 && clk != CLOCK_THREAD_CPUTIME_ID, 1)) return (int)sys::clock_gettime(clk, ts);
  bool bad;
  G* gp = clock_g(clk, &bad);
  if (!gp && !bad) return (int)sys::clock_gettime(clk, ts);
  int64_t ns = bad ? -1 : g_cputime(gp, shim::user_g());
  if (ns < 0) {
    errno = EINVAL;  // the kernel's answer for a thread that is gone
    return -1;
  }
  ts->tv_sec = ns / 1000000000;
  ts->tv_nsec = ns % 1000000000;
  return 0;
}

GOSHIM_EXPORT int clock_getres(clockid_t clk, struct timespec* res) {
  shim::ensure_real();
  if (clk >= 0 && clk != CLOCK_THREAD_CPUTIME_ID) return real::clock_getres(clk, res);
  bool bad;
  G* gp = clock_g(clk, &bad);
  if (!gp && !bad) return real::clock_getres(clk, res);
  if (bad) {
    errno = EINVAL;
    return -1;
  }
  if (res) *res = timespec{0, 1};
  return 0;
}

// RUSAGE_THREAD on a goroutine: its own CPU time, split between user and
// system time as its M's is; the other fields are the M's.
GOSHIM_EXPORT int getrusage(int who, struct rusage* ru) {
  shim::ensure_real();
  G* gp = who == RUSAGE_THREAD ? shim::user_g() : nullptr;
  int r = real::getrusage(who, ru);
  if (r != 0 || !gp) return r;
  int64_t ns = g_cputime(gp, gp);
  int64_t mu = (int64_t)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec;
  int64_t ms = (int64_t)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec;
  int64_t us = ns / 1000;
  int64_t u = mu + ms > 0 ? (int64_t)((__int128)us * mu / (mu + ms)) : us;
  int64_t s = us - u;
  ru->ru_utime.tv_sec = u / 1000000;
  ru->ru_utime.tv_usec = u % 1000000;
  ru->ru_stime.tv_sec = s / 1000000;
  ru->ru_stime.tv_usec = s % 1000000;
  return 0;
}
