// poll, select and epoll_wait for goroutines (pollwait.cpp): each waits in
// netpoll_wait_fds (netpoll.hpp) with the real call, at a zero timeout, as
// its readiness test. On user G. deadline: monotonic ns, 0 = none.
// sigmask (ppoll, pselect, epoll_pwait): the goroutine's signal mask for
// the duration of the wait, or nullptr. Kernel-convention results.
#pragma once

#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>

namespace goshim {

long poll_fds(struct pollfd* fds, nfds_t n, int64_t deadline, const sigset_t* sigmask);
// Linux select: the sets are written back on success and on timeout, left
// alone on EINTR.
long select_fds(int n, fd_set* r, fd_set* w, fd_set* e, int64_t deadline, const sigset_t* sigmask);
// select: validates *tv and leaves the time not slept in it, as Linux does.
long select_tv(int n, fd_set* r, fd_set* w, fd_set* e, struct timeval* tv);
long epoll_wait_fd(int epfd, struct epoll_event* ev, int max, int64_t deadline,
                   const sigset_t* sigmask);

// Deadline helpers: a poll/epoll timeout in ms (< 0: none), a timespec
// (nullptr: none; the caller validated it).
int64_t deadline_after_ms(int ms);
int64_t deadline_after_ts(const struct timespec* ts);

}  // namespace goshim
