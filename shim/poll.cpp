// poll, ppoll, select, pselect, epoll_wait, epoll_pwait, epoll_pwait2: a
// goroutine waits in netpoll (core/pollwait.hpp); zero timeouts and callers
// off a goroutine go straight to libc, but a goroutine's zero-timeout ppoll
// and pselect with a signal mask: the mask is the G's, and a signal pending
// on the G that it opens runs its handler and ends the call with EINTR, as
// the kernel's (epoll_pwait's zero timeout returns before it looks at
// signals).
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "core/netpoll.hpp"
#include "core/pollwait.hpp"
#include "core/real.hpp"
#include "shim/io.hpp"

using namespace goshim;
using shim::set_errno;

namespace {

bool ts_valid(const struct timespec* ts) {
  return !ts || (ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000);
}

bool ts_zero(const struct timespec* ts) { return ts && ts->tv_sec == 0 && ts->tv_nsec == 0; }

}  // namespace

GOSHIM_EXPORT int poll(struct pollfd* fds, nfds_t n, int timeout) {
  GOSHIM_IO_ENTRY();
  if (!fd_user_g() || timeout == 0) {
    shim::ensure_real();
    return real::poll(fds, n, timeout);
  }
  return (int)set_errno(poll_fds(fds, n, deadline_after_ms(timeout), nullptr));
}
GOSHIM_EXPORT int __poll(struct pollfd* fds, nfds_t n, int timeout) {
  GOSHIM_IO_ENTRY();
  return poll(fds, n, timeout);
}
GOSHIM_EXPORT int __poll_chk(struct pollfd* fds, nfds_t n, int timeout, size_t fdslen) {
  GOSHIM_IO_ENTRY();
  if (fdslen / sizeof(*fds) < n) __chk_fail();
  return poll(fds, n, timeout);
}

GOSHIM_EXPORT int ppoll(struct pollfd* fds, nfds_t n, const struct timespec* ts,
                        const sigset_t* mask) {
  GOSHIM_IO_ENTRY();
  if (!fd_user_g() || (ts_zero(ts) && !mask)) {
    shim::ensure_real();
    return real::ppoll(fds, n, ts, mask);
  }
  if (!ts_valid(ts)) return (int)set_errno(-EINVAL);
  return (int)set_errno(poll_fds(fds, n, ts_zero(ts) ? -1 : deadline_after_ts(ts), mask));
}
GOSHIM_EXPORT int __ppoll_chk(struct pollfd* fds, nfds_t n, const struct timespec* ts,
                              const sigset_t* mask, size_t fdslen) {
  GOSHIM_IO_ENTRY();
  if (fdslen / sizeof(*fds) < n) __chk_fail();
  return ppoll(fds, n, ts, mask);
}

GOSHIM_EXPORT int select(int n, fd_set* r, fd_set* w, fd_set* e, struct timeval* tv) {
  GOSHIM_IO_ENTRY();
  if (!fd_user_g() || (tv && tv->tv_sec == 0 && tv->tv_usec == 0)) {
    shim::ensure_real();
    return real::select(n, r, w, e, tv);
  }
  return (int)set_errno(select_tv(n, r, w, e, tv));
}
GOSHIM_EXPORT int __select(int n, fd_set* r, fd_set* w, fd_set* e, struct timeval* tv) {
  GOSHIM_IO_ENTRY();
  return select(n, r, w, e, tv);
}

GOSHIM_EXPORT int pselect(int n, fd_set* r, fd_set* w, fd_set* e, const struct timespec* ts,
                          const sigset_t* mask) {
  GOSHIM_IO_ENTRY();
  if (!fd_user_g() || (ts_zero(ts) && !mask)) {
    shim::ensure_real();
    return real::pselect(n, r, w, e, ts, mask);
  }
  if (!ts_valid(ts)) return (int)set_errno(-EINVAL);
  // glibc's pselect leaves *ts alone.
  return (int)set_errno(select_fds(n, r, w, e, ts_zero(ts) ? -1 : deadline_after_ts(ts), mask));
}

GOSHIM_EXPORT int epoll_wait(int epfd, struct epoll_event* ev, int max, int timeout) {
  GOSHIM_IO_ENTRY();
  if (!fd_user_g() || timeout == 0) {
    shim::ensure_real();
    return real::epoll_wait(epfd, ev, max, timeout);
  }
  return (int)set_errno(epoll_wait_fd(epfd, ev, max, deadline_after_ms(timeout), nullptr));
}

GOSHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event* ev, int max, int timeout,
                              const sigset_t* mask) {
  GOSHIM_IO_ENTRY();
  if (!fd_user_g() || timeout == 0) {
    shim::ensure_real();
    return real::epoll_pwait(epfd, ev, max, timeout, mask);
  }
  return (int)set_errno(epoll_wait_fd(epfd, ev, max, deadline_after_ms(timeout), mask));
}

GOSHIM_EXPORT int epoll_pwait2(int epfd, struct epoll_event* ev, int max,
                               const struct timespec* ts, const sigset_t* mask) {
  GOSHIM_IO_ENTRY();
  if (!fd_user_g() || ts_zero(ts)) {
    shim::ensure_real();
    return real::epoll_pwait2(epfd, ev, max, ts, mask);
  }
  if (!ts_valid(ts)) return (int)set_errno(-EINVAL);
  return (int)set_errno(epoll_wait_fd(epfd, ev, max, deadline_after_ts(ts), mask));
}
