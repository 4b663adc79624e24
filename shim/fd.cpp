// fd lifetime and modes: creation calls record the fd in goshim's table,
// dup copies, close retires, fcntl/ioctl present the program's own
// O_NONBLOCK view (core/fdops.hpp). Safe before init and on any thread.
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/fdops.hpp"
#include "core/real.hpp"
#include "shim/io.hpp"

using namespace goshim;
using shim::set_errno;

GOSHIM_EXPORT int socket(int domain, int type, int proto) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_socket(domain, type, proto));
}
GOSHIM_EXPORT int __socket(int domain, int type, int proto) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_socket(domain, type, proto));
}
GOSHIM_EXPORT int socketpair(int domain, int type, int proto, int sv[2]) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_socketpair(domain, type, proto, sv));
}
GOSHIM_EXPORT int pipe(int fds[2]) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_pipe2(fds, 0));
}
GOSHIM_EXPORT int __pipe(int fds[2]) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_pipe2(fds, 0));
}
GOSHIM_EXPORT int pipe2(int fds[2], int flags) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_pipe2(fds, flags));
}
GOSHIM_EXPORT int eventfd(unsigned int initval, int flags) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_eventfd(initval, flags));
}
GOSHIM_EXPORT int timerfd_create(int clk, int flags) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_timerfd_create(clk, flags));
}
GOSHIM_EXPORT int signalfd(int fd, const sigset_t* mask, int flags) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_signalfd(fd, mask, flags));
}
GOSHIM_EXPORT int epoll_create(int size) {
  GOSHIM_IO_ENTRY();
  if (size <= 0) return (int)set_errno(-EINVAL);
  return (int)set_errno(fdop_epoll_create1(0));
}
GOSHIM_EXPORT int epoll_create1(int flags) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_epoll_create1(flags));
}

GOSHIM_EXPORT int dup(int fd) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_dup(fd));
}
GOSHIM_EXPORT int dup2(int oldfd, int newfd) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_dup3(oldfd, newfd, 0, true));
}
GOSHIM_EXPORT int __dup2(int oldfd, int newfd) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_dup3(oldfd, newfd, 0, true));
}
GOSHIM_EXPORT int dup3(int oldfd, int newfd, int flags) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_dup3(oldfd, newfd, flags, false));
}

// fcntl and ioctl are variadic: the optional argument is one word.
GOSHIM_EXPORT int fcntl(int fd, int cmd, ...) {
  GOSHIM_IO_ENTRY();
  va_list ap;
  va_start(ap, cmd);
  long arg = va_arg(ap, long);
  va_end(ap);
  return (int)set_errno(fdop_fcntl(fd, cmd, arg));
}
GOSHIM_EXPORT int fcntl64(int fd, int cmd, ...) {
  GOSHIM_IO_ENTRY();
  va_list ap;
  va_start(ap, cmd);
  long arg = va_arg(ap, long);
  va_end(ap);
  return (int)set_errno(fdop_fcntl(fd, cmd, arg));
}
GOSHIM_EXPORT int __fcntl(int fd, int cmd, ...) {
  GOSHIM_IO_ENTRY();
  va_list ap;
  va_start(ap, cmd);
  long arg = va_arg(ap, long);
  va_end(ap);
  return (int)set_errno(fdop_fcntl(fd, cmd, arg));
}
GOSHIM_EXPORT int ioctl(int fd, unsigned long req, ...) {
  GOSHIM_IO_ENTRY();
  va_list ap;
  va_start(ap, req);
  long arg = va_arg(ap, long);
  va_end(ap);
  return (int)set_errno(fdop_ioctl(fd, req, arg));
}

// close is a cancellation point: a pending cancellation acts at entry,
// before anything is closed (the descriptor stays open), as glibc's. Not
// inside fdop_close: syscall(SYS_close) is none.
GOSHIM_EXPORT int close(int fd) {
  GOSHIM_IO_ENTRY();
  cancel_point_any();
  return (int)set_errno(fdop_close(fd));
}
GOSHIM_EXPORT int __close(int fd) {
  GOSHIM_IO_ENTRY();
  cancel_point_any();
  return (int)set_errno(fdop_close(fd));
}
GOSHIM_EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_close_range(first, last, flags));
}
GOSHIM_EXPORT void closefrom(int lowfd) {
  GOSHIM_IO_ENTRY();
  fdop_closefrom(lowfd);
}

// stdio will read and write fd behind goshim's back: give the file back
// its blocking mode first.
GOSHIM_EXPORT FILE* fdopen(int fd, const char* mode) {
  GOSHIM_IO_ENTRY();
  fdop_before_fdopen(fd);
  shim::ensure_real();
  return real::fdopen(fd, mode);
}
