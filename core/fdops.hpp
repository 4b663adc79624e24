// fd lifetime and control on top of the fd table (fdtable.hpp): creation
// calls that set up table entries, dup/close that copy and retire them,
// and the calls that read or change an fd's mode (fcntl, ioctl FIONBIO,
// setsockopt timeouts, shutdown). Any thread; kernel convention results
// (>= 0 or -errno). Creation keeps pollable fds O_NONBLOCK underneath once
// the runtime is up (before that they are switched lazily on first use).
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>

namespace goshim {

long fdop_socket(int domain, int type, int proto);
long fdop_socketpair(int domain, int type, int proto, int sv[2]);
long fdop_pipe2(int fds[2], int flags);
long fdop_eventfd(unsigned initval, int flags);
long fdop_timerfd_create(int clk, int flags);
long fdop_signalfd(int fd, const sigset_t* mask, int flags);
long fdop_epoll_create1(int flags);

long fdop_dup(int fd);
// dup2 (is_dup2) or dup3.
long fdop_dup3(int oldfd, int newfd, int flags, bool is_dup2);
long fdop_fcntl(int fd, int cmd, long arg);
long fdop_ioctl(int fd, unsigned long req, long arg);

long fdop_close(int fd);
long fdop_close_range(unsigned first, unsigned last, int flags);
void fdop_closefrom(int lowfd);

long fdop_shutdown(int fd, int how);
long fdop_setsockopt(int fd, int level, int name, const void* val, socklen_t len);
// Before sendmsg: fds passed with SCM_RIGHTS leave goshim's care.
void fdop_before_sendmsg(const struct msghdr* m);
// Before fdopen: stdio will do I/O on fd behind goshim's back.
void fdop_before_fdopen(int fd);

}  // namespace goshim
