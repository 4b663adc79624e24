// sleep, usleep, nanosleep, clock_nanosleep, thrd_sleep: a goroutine parks
// on its timer (core/sleep.hpp) instead of blocking its M. Argument checks
// and results follow glibc and the kernel.
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include "core/real.hpp"
#include "core/netpoll.hpp"
#include "core/sleep.hpp"
#include "shim/io.hpp"
#include "syscalls/blocking.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

constexpr int64_t kNs = 1000000000;

bool ts_valid(const struct timespec* ts) {
  return ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < kNs;
}

void fill(struct timespec* ts, int64_t ns) {
  ts->tv_sec = ns / kNs;
  ts->tv_nsec = ns % kNs;
}

// nanosleep's body for a goroutine: 0 or an error number.
int nanosleep_g(const struct timespec* req, struct timespec* rem) {
  if (!req) return EFAULT;
  if (!ts_valid(req)) return EINVAL;
  int64_t deadline;
  sleep_deadline(CLOCK_MONOTONIC, 0, req, &deadline);
  int64_t left = 0;
  int r = sleep_until(deadline, &left);
  if (r == EINTR && rem) fill(rem, left);
  return r;
}

}  // namespace

GOSHIM_EXPORT int nanosleep(const struct timespec* req, struct timespec* rem) {
  GOSHIM_IO_ENTRY();
  if (!fd_user_g()) {
    shim::ensure_real();
    return real::nanosleep(req, rem);
  }
  return (int)shim::set_errno(-nanosleep_g(req, rem));
}
GOSHIM_EXPORT int __nanosleep(const struct timespec* req, struct timespec* rem) {
  GOSHIM_IO_ENTRY();
  return nanosleep(req, rem);
}

GOSHIM_EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec* req,
                                  struct timespec* rem) {
  GOSHIM_IO_ENTRY();
  if (!fd_user_g()) {
    shim::ensure_real();
    return real::clock_nanosleep(clk, flags, req, rem);
  }
  if (clk == CLOCK_THREAD_CPUTIME_ID) return EINVAL;  // glibc's own answer
  int64_t deadline;
  if (!req || !ts_valid(req) || !sleep_deadline(clk, flags, req, &deadline)) {
    // Other clocks (CPU-time clocks, alarms), or bad arguments: the kernel
    // decides, as a blocking call.
    return blocking_cancellable(BlockKind::Long, "clock_nanosleep",
                                [&] { return real::clock_nanosleep(clk, flags, req, rem); });
  }
  int64_t left = 0;
  int r = sleep_until(deadline, &left);
  if (r == EINTR && rem && !(flags & TIMER_ABSTIME)) fill(rem, left);
  return r;  // clock_nanosleep returns the error; errno is untouched
}

GOSHIM_EXPORT int usleep(useconds_t us) {
  GOSHIM_IO_ENTRY();
  if (!fd_user_g()) {
    shim::ensure_real();
    return real::usleep(us);
  }
  struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
  return (int)shim::set_errno(-nanosleep_g(&ts, nullptr));
}

GOSHIM_EXPORT unsigned int sleep(unsigned int s) {
  GOSHIM_IO_ENTRY();
  if (!fd_user_g()) {
    shim::ensure_real();
    return real::sleep(s);
  }
  int saved = errno;
  struct timespec ts = {(time_t)s, 0}, rem = {0, 0};
  int r = nanosleep_g(&ts, &rem);
  if (r == EINTR) {
    errno = EINTR;
    return (unsigned int)rem.tv_sec;  // whole seconds not slept, as glibc
  }
  errno = saved;
  return 0;
}

// C11: 0, -1 when interrupted (with *rem), another negative value on
// error; errno is not set (glibc's thrd_sleep wraps clock_nanosleep).
GOSHIM_EXPORT int thrd_sleep(const struct timespec* req, struct timespec* rem) {
  GOSHIM_IO_ENTRY();
  int r;
  if (!fd_user_g()) {
    shim::ensure_real();
    r = real::clock_nanosleep(CLOCK_REALTIME, 0, req, rem);
  } else {
    r = nanosleep_g(req, rem);
  }
  return r == 0 ? 0 : (r == EINTR ? -1 : -2);
}
