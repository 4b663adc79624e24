// syscall(): the fd calls made through libc's syscall() get the same
// treatment as through their libc wrappers. goshim keeps the fds it creates
// O_NONBLOCK underneath, so a raw read of an empty pipe would otherwise
// return EAGAIN to a program that sees the pipe as blocking; and a raw
// close would leave a stale fd-table entry. Every other number goes to
// libc's syscall() unchanged.
//
// goshim_syscall_io is the C half for an assembly syscall() entry that
// dispatches by number (the synchronization layer's, for SYS_futex): with
// both, route these numbers here.
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "core/fdio.hpp"
#include "core/fdops.hpp"
#include "core/real_io.hpp"
#include "shim/io.hpp"

using namespace goshim;

// Serves nr if it is one of the fd calls; *handled says whether it did.
// Returns syscall()'s convention (the result, or -1 with errno).
extern "C" __attribute__((visibility("hidden"))) long goshim_syscall_io(long nr, long a1, long a2,
                                                                       long a3, long a4, long a5,
                                                                       long a6, bool* handled) {
  *handled = true;
  long r;
  switch (nr) {
    case SYS_read:
      r = io_read((int)a1, (void*)a2, (size_t)a3);
      break;
    case SYS_write:
      r = io_write((int)a1, (const void*)a2, (size_t)a3);
      break;
    case SYS_readv:
      r = io_readv((int)a1, (const struct iovec*)a2, (int)a3);
      break;
    case SYS_writev:
      r = io_writev((int)a1, (const struct iovec*)a2, (int)a3);
      break;
    case SYS_recvfrom:
      r = io_recvfrom((int)a1, (void*)a2, (size_t)a3, (int)a4, (struct sockaddr*)a5,
                      (socklen_t*)a6);
      break;
    case SYS_sendto:
      r = io_sendto((int)a1, (const void*)a2, (size_t)a3, (int)a4, (const struct sockaddr*)a5,
                    (socklen_t)a6);
      break;
    case SYS_recvmsg:
      r = io_recvmsg((int)a1, (struct msghdr*)a2, (int)a3);
      break;
    case SYS_sendmsg:
      fdop_before_sendmsg((const struct msghdr*)a2);
      r = io_sendmsg((int)a1, (const struct msghdr*)a2, (int)a3);
      break;
    case SYS_accept:
      r = io_accept4((int)a1, (struct sockaddr*)a2, (socklen_t*)a3, 0);
      break;
    case SYS_accept4:
      r = io_accept4((int)a1, (struct sockaddr*)a2, (socklen_t*)a3, (int)a4);
      break;
    case SYS_connect:
      r = io_connect((int)a1, (const struct sockaddr*)a2, (socklen_t)a3);
      break;
    case SYS_close:
      r = fdop_close((int)a1);
      break;
    case SYS_fcntl:
      r = fdop_fcntl((int)a1, (int)a2, a3);
      break;
    case SYS_dup:
      r = fdop_dup((int)a1);
      break;
    case SYS_dup2:
      r = fdop_dup3((int)a1, (int)a2, 0, true);
      break;
    case SYS_dup3:
      r = fdop_dup3((int)a1, (int)a2, (int)a3, false);
      break;
    default:
      *handled = false;
      return 0;
  }
  return shim::set_errno(r);
}

GOSHIM_EXPORT long syscall(long nr, ...) {
  GOSHIM_IO_ENTRY();
  va_list ap;
  va_start(ap, nr);
  long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
  long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
  va_end(ap);
  bool handled;
  long r = goshim_syscall_io(nr, a1, a2, a3, a4, a5, a6, &handled);
  if (handled) return r;
  shim::ensure_real();
  return real::syscall(nr, a1, a2, a3, a4, a5, a6);
}
