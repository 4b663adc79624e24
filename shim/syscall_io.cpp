// syscall(): the fd calls made through libc's syscall() get the same
// treatment as through their libc wrappers. goshim keeps the fds it creates
// O_NONBLOCK underneath, so a raw read of an empty pipe would otherwise
// return EAGAIN to a program that sees the pipe as blocking; and a raw
// close would leave a stale fd-table entry. Every other number goes to
// libc's syscall() unchanged.
//
// sched_setattr and sched_getattr come here too (shim/pthread_misc.cpp: a
// goroutine's own policy). io_uring_setup and io_uring_register come here too (glibc has no wrapper
// for them: programs such as fio call syscall()). The kernel ties a ring
// set up IORING_SETUP_SINGLE_ISSUER (DEFER_TASKRUN needs it) to the
// calling kernel thread, or, set up IORING_SETUP_R_DISABLED, to the one
// that enables it (IORING_REGISTER_ENABLE_RINGS), and answers a submission
// or a wait from any other with EEXIST. A goroutine moves between Ms, so
// such a ring's thread is bound to its M for the rest of its life
// (rt_bind_kernel_thread), as natively one kernel thread. Enabling binds
// whatever the ring's flags (goshim cannot read them back): a rare call.
// liburing's own system calls (inline, not through syscall()) are not
// seen: LD_PRELOAD.md 7.3.
//
// The entry is arch/<arch>/syscall.S, which dispatches by number.
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <linux/io_uring.h>

#include "core/fdio.hpp"
#include "core/fdops.hpp"
#include "core/real.hpp"
#include "core/rtlock.hpp"
#include "core/signal.hpp"
#include "shim/io.hpp"
#include "syscalls/sys.hpp"

// Linux 6.0's flag, absent from older kernel headers (Debian 11's).
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif

using namespace goshim;

long goshim_sched_setattr(long pid, long attr, long flags);  // shim/pthread_misc.cpp
long goshim_sched_getattr(long pid, long attr, long size, long flags);

namespace {

// The calling thread's goroutine stays on its M from here on (see the top
// of this file). Nothing to do for a foreign kernel thread or in 1:1 mode
// (every thread is its own kernel thread), nor for a G in a signal
// handler (it does not serve calls: not bound, a limit).
void bind_kernel_thread() {
  G* g = tls_g;
  if (!g || g->is_g0()) return;
  // Bound already (real-time): stays bound when it goes back to SCHED_OTHER.
  if (g->rt_locked || shim::user_g()) rt_bind_kernel_thread(g);
}

}  // namespace

// The C half of arch/<arch>/syscall.S for the fd calls (seven longs: the
// number and the six arguments, the last on the stack, as the assembly
// leaves them). syscall()'s convention: the result, or -1 with errno.
extern "C" __attribute__((visibility("hidden"))) long goshim_syscall_io(long nr, long a1, long a2,
                                                                       long a3, long a4, long a5,
                                                                       long a6) {
  GOSHIM_IO_ENTRY();
  // syscall() is no cancellation point, unlike the libc wrappers these
  // calls share their code with (fdio's cancel_point at entry, the real
  // fcntl(F_SETLKW), the interruption of a wait by pthread_cancel): a
  // deferred cancellation stays pending through it, as natively.
  CancelOff no_cancel(true);
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
#ifdef SYS_dup2  // not in the generic table (aarch64)
    case SYS_dup2:
      r = fdop_dup3((int)a1, (int)a2, 0, true);
      break;
#endif
    case SYS_dup3:
      r = fdop_dup3((int)a1, (int)a2, (int)a3, false);
      break;
#ifdef SYS_io_uring_setup
    case SYS_io_uring_setup: {
      const auto* p = (const struct io_uring_params*)a2;
      // Read before the call (the kernel writes the structure back).
      bool single = p && (p->flags & IORING_SETUP_SINGLE_ISSUER) && !(p->flags & IORING_SETUP_R_DISABLED);
      r = sys::raw6(nr, a1, a2, a3, a4, a5, a6);
      if (r >= 0 && single) bind_kernel_thread();
      break;
    }
    case SYS_io_uring_register:
      r = sys::raw6(nr, a1, a2, a3, a4, a5, a6);
      if (r >= 0 && a2 == IORING_REGISTER_ENABLE_RINGS) bind_kernel_thread();
      break;
#endif
    case SYS_sched_setattr:
      r = goshim_sched_setattr(a1, a2, a3);  // shim/pthread_misc.cpp
      break;
    case SYS_sched_getattr:
      r = goshim_sched_getattr(a1, a2, a3, a4);
      break;
    default:
      r = sys::raw6(nr, a1, a2, a3, a4, a5, a6);  // not routed here by the entry
      break;
  }
  return shim::set_errno(r);
}
