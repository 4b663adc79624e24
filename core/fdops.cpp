// fd lifetime and control (see fdops.hpp).
#include "core/fdops.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>

#include "core/fdtable.hpp"
// Older headers (glibc < 2.34, Debian 11) lack these Linux 5.9 names.
#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#include "core/netpoll.hpp"
#include "core/ownfd.hpp"
#include "core/real.hpp"
#include "core/runtime.hpp"
#include "syscalls/blocking.hpp"
#include "syscalls/sys.hpp"
#include "syscalls/sys_io.hpp"

namespace goshim {

namespace {

inline G* op_user_g() { return fd_user_g(); }

inline long errno_result(long r) { return r < 0 ? -(long)errno : r; }

// Whether new pollable fds get O_NONBLOCK underneath right away.
inline bool nb_now() { return mn_active(); }

uint32_t base_flags(bool user_nonblock, bool nb) {
  return (uint32_t)kFileOwned | kFilePollable | (user_nonblock ? (uint32_t)kFileUserNonblock : 0u) |
         (nb ? (uint32_t)kFileNbUnder : 0u);
}

// A socket timeout in ns as fdio keeps it (0: none). The kernel turns a
// negative one into a zero wait (the call fails with EAGAIN at once), kept
// here as 1 ns, already expired when the call would park.
int64_t tv_ns(const void* val, socklen_t len) {
  if (len < sizeof(struct timeval)) return -1;
  const struct timeval* tv = (const struct timeval*)val;
  if (tv->tv_sec < 0) return 1;
  return (int64_t)tv->tv_sec * 1000000000 + (int64_t)tv->tv_usec * 1000;
}

}  // namespace

// ---- creation -----------------------------------------------------------------------------

long fdop_socket(int domain, int type, int proto) {
  bool nb = nb_now();
  FdCreating creating(nb);
  long r = sys::socket(domain, type | (nb ? SOCK_NONBLOCK : 0), proto);
  if (r < 0) return r;
  uint32_t fl = base_flags(type & SOCK_NONBLOCK, nb);
  if ((type & 0xf) == SOCK_STREAM) fl |= kFileStream;
  if (domain == AF_UNIX) fl |= kFileUnix;
  fd_new((int)r, FdKind::Socket, fl);
  return r;
}

long fdop_socketpair(int domain, int type, int proto, int sv[2]) {
  bool nb = nb_now();
  FdCreating creating(nb);
  int v[2];
  long r = sys::socketpair(domain, type | (nb ? SOCK_NONBLOCK : 0), proto, v);
  if (r < 0) return r;
  uint32_t fl = base_flags(type & SOCK_NONBLOCK, nb);
  bool stream = (type & 0xf) == SOCK_STREAM;
  if (stream) fl |= kFileStream;
  if (domain == AF_UNIX) fl |= kFileUnix;
  fd_new(v[0], FdKind::Socket, fl);
  fd_new(v[1], FdKind::Socket, fl);
  if (stream) {
    fd_link(v[0], v[1]);
    fd_link(v[1], v[0]);
  }
  fd_install_atfork();
  sv[0] = v[0];
  sv[1] = v[1];
  return 0;
}

long fdop_pipe2(int fds[2], int flags) {
  int v[2];
  if (__builtin_expect(ownfd_capturing(), 0)) {
    // A library's pipe for goshim's own use (the unwinder's).
    long r = sys::pipe2(v, flags);
    if (r < 0) return r;
    for (int i = 0; i < 2; i++) {
      if (!(flags & O_CLOEXEC)) {
        fds[i] = v[i];  // the library wants it inherited: leave it alone
        continue;
      }
      fds[i] = ownfd_place(v[i]);
      ownfd_add_fixed(fds[i]);
    }
    return 0;
  }
  bool nb = nb_now();
  FdCreating creating(nb);
  long r = sys::pipe2(v, flags | (nb ? O_NONBLOCK : 0));
  if (r < 0) return r;
  uint32_t fl = base_flags(flags & O_NONBLOCK, nb);
  bool packet = flags & O_DIRECT;
  if (!packet) fl |= kFileStream;
  fd_new(v[0], FdKind::Pipe, fl);
  fd_new(v[1], FdKind::Pipe, fl);
  if (!packet) fd_link(v[1], v[0]);
  fd_install_atfork();
  fds[0] = v[0];
  fds[1] = v[1];
  return 0;
}

long fdop_eventfd(unsigned initval, int flags) {
  bool nb = nb_now();
  FdCreating creating(nb);
  long r = sys::eventfd2(initval, flags | (nb ? EFD_NONBLOCK : 0));
  if (r >= 0) fd_new((int)r, FdKind::EventFd, base_flags(flags & EFD_NONBLOCK, nb));
  return r;
}

long fdop_timerfd_create(int clk, int flags) {
  bool nb = nb_now();
  FdCreating creating(nb);
  long r = sys::raw2(SYS_timerfd_create, clk, flags | (nb ? TFD_NONBLOCK : 0));
  if (r >= 0) fd_new((int)r, FdKind::TimerFd, base_flags(flags & TFD_NONBLOCK, nb));
  return r;
}

long fdop_signalfd(int fd, const sigset_t* mask, int flags) {
  if (fd != -1) return sys::raw4(SYS_signalfd4, fd, (long)mask, 8, flags);  // changes the mask only
  bool nb = nb_now();
  FdCreating creating(nb);
  long r = sys::raw4(SYS_signalfd4, -1, (long)mask, 8, flags | (nb ? SFD_NONBLOCK : 0));
  if (r >= 0) fd_new((int)r, FdKind::SignalFd, base_flags(flags & SFD_NONBLOCK, nb));
  return r;
}

long fdop_epoll_create1(int flags) {
  long r = sys::epoll_create1(flags);
  // epoll_wait ignores O_NONBLOCK: nothing to switch. Pollable: waits on
  // it park in netpoll (the instance is watched by goshim's own).
  if (r >= 0) fd_new((int)r, FdKind::Epoll, kFileOwned | kFilePollable);
  return r;
}

// ---- dup ------------------------------------------------------------------------------------

// stdio's stdin, stdout and stderr do their I/O on fds 0-2 inside libc,
// behind goshim's back: a file that becomes one of them gets its blocking
// mode back (it is shared with the program's other copies).
static void dup_done(const FdDupSrc& src, int oldfd, long newfd) {
  fd_dup_end(src, oldfd, newfd >= 0 ? (int)newfd : -1);
  if (newfd >= 0 && newfd <= 2) fd_release_to_kernel((int)newfd);
}

long fdop_dup(int fd) {
  if (ownfd_is(fd)) return -EBADF;  // not the program's
  FdDupSrc src = fd_dup_begin(fd);
  long r = sys::dup(fd);
  dup_done(src, fd, r);
  return r;
}

long fdop_dup3(int oldfd, int newfd, int flags, bool is_dup2) {
  if (oldfd == newfd) {
    if (!is_dup2) return -EINVAL;
    long r = ownfd_is(oldfd) ? -EBADF : sys::fcntl(oldfd, F_GETFD, 0);
    return r < 0 ? r : newfd;
  }
  // Fail as the kernel does before retiring newfd's record: a bad oldfd
  // leaves newfd open.
  long chk = ownfd_is(oldfd) ? -EBADF : sys::fcntl(oldfd, F_GETFD, 0);
  if (chk < 0) return chk;
  if (newfd < 0) return -EBADF;
  // newfd may be one of goshim's own fds: it moves elsewhere first.
  long v = ownfd_vacate(newfd);
  if (v < 0) return v;
  FdDupSrc src = fd_dup_begin(oldfd);
  FdClose old = fd_close_begin(newfd);  // dup3 closes newfd implicitly
  long r = sys::dup3(oldfd, newfd, flags);
  dup_done(src, oldfd, r >= 0 ? newfd : -1);
  fd_close_end(newfd, old);
  return r;
}

// ---- fcntl and ioctl --------------------------------------------------------------------------

long fdop_fcntl(int fd, int cmd, long arg) {
  if (ownfd_is(fd)) return -EBADF;  // not the program's
  switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      FdDupSrc src = fd_dup_begin(fd);
      long r = sys::fcntl(fd, cmd, arg);
      dup_done(src, fd, r);
      return r;
    }
    case F_GETFL: {
      long r = sys::fcntl(fd, F_GETFL, 0);
      if (r < 0) return r;
      PollDesc* pd = fd_peek(fd);
      FileRec* f = pd ? pd->file : nullptr;
      if (f) {
        uint32_t fl = f->flags.load(std::memory_order_acquire);
        if (fl & kFileNbUnder) r = (r & ~O_NONBLOCK) | ((fl & kFileUserNonblock) ? O_NONBLOCK : 0);
      }
      return r;
    }
    case F_SETFL: {
      int err;
      PollDesc* pd = fd_get(fd, &err);
      if (!pd) return err == -EBADF ? -EBADF : sys::fcntl(fd, F_SETFL, arg);
      bool under = pd->file->flags.load(std::memory_order_acquire) & kFileNbUnder;
      long r = sys::fcntl(fd, F_SETFL, under ? (arg | O_NONBLOCK) : arg);
      if (r >= 0) fd_set_user_nonblock(pd, arg & O_NONBLOCK);
      pd_put(pd);
      return r;
    }
    case F_SETLKW:
    case F_OFD_SETLKW: {
      if (op_user_g()) {
        // libc's fcntl: a cancellation point for these commands, as natively.
        if (real::fcntl)
          return errno_result(blocking_cancellable(BlockKind::Long, "fcntl(F_SETLKW)",
                                                   [&] { return real::fcntl(fd, cmd, arg); }));
        BlockingCall bc(BlockKind::Long, "fcntl(F_SETLKW)");
        return sys::fcntl(fd, cmd, arg);
      }
      if (real::fcntl) return errno_result(real::fcntl(fd, cmd, arg));
      return sys::fcntl(fd, cmd, arg);
    }
    default:
      // glibc's own conventions (F_GETOWN through F_GETOWN_EX, ...).
      if (real::fcntl) return errno_result(real::fcntl(fd, cmd, arg));
      return sys::fcntl(fd, cmd, arg);
  }
}

long fdop_ioctl(int fd, unsigned long req, long arg) {
  if (req == FIONBIO) {
    PollDesc* pd = fd_peek(fd);
    FileRec* f = pd ? pd->file : nullptr;
    // The kernel validates the pointer and applies the program's value;
    // then keep O_NONBLOCK underneath if goshim relies on it.
    long r = sys::ioctl(fd, FIONBIO, arg);
    if (r < 0 || !f) return r;
    int on = *(const int*)arg;
    int err;
    pd = fd_get(fd, &err);
    if (!pd) return r;
    fd_set_user_nonblock(pd, on != 0);
    if (!on && (pd->file->flags.load(std::memory_order_acquire) & kFileNbUnder)) {
      int one = 1;
      sys::ioctl(fd, FIONBIO, (long)&one);
    }
    pd_put(pd);
    return r;
  }
  if (real::ioctl) return errno_result(real::ioctl(fd, req, arg));
  return sys::ioctl(fd, req, arg);
}

// ---- close ----------------------------------------------------------------------------------

long fdop_close(int fd) {
  if (ownfd_is(fd)) return -EBADF;  // not the program's
  FdClose c = fd_close_begin(fd);
  PollDesc* pd = c.pd;
  long r;
  if (op_user_g()) {
    if (!pd || pd_kind(pd) == FdKind::File || pd_kind(pd) == FdKind::Other) {
      // A regular file's close may flush (NFS): a blocking call.
      BlockingCall bc(BlockKind::Short, "close");
      r = sys::close(fd);
    } else {
      r = sys::close(fd);
    }
  } else if (c.word || c.pd) {
    // Never libc's close between fd_close_begin and fd_close_end: a
    // cancellation point, which would unwind a canceled caller (a kernel
    // thread, a goroutine in a signal handler) with the slot left closing
    // and the descriptor's reference taken, the number open or not. The
    // shim acted on a pending cancellation before the begin.
    r = sys::close(fd);
  } else {
    r = real::close ? errno_result(real::close(fd)) : sys::close(fd);
  }
  fd_close_end(fd, c);
  return r;
}

long fdop_close_range(unsigned first, unsigned last, int flags) {
  if (first > last) return -EINVAL;
  if (!(flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE))) {
    // The fds goshim tracks close one by one (leaving epoll first); the
    // kernel closes the rest.
    for (int fd = fd_next_tracked((int)first); fd >= 0 && (unsigned)fd <= last;
         fd = fd_next_tracked(fd + 1)) {
      if (ownfd_is(fd)) continue;
      FdClose c = fd_close_begin(fd);
      if (c.word) sys::close(fd);  // before the slot is "unknown" again
      fd_close_end(fd, c);
    }
  }
  // goshim's own fds stay open: close the range around them.
  int own[32];
  int n = ownfd_in_range(first, last, own, 32);
  unsigned lo = first;
  for (int i = 0; i < n; i++) {
    unsigned o = (unsigned)own[i];
    if (o < lo) continue;  // a duplicate
    if (o > lo) {
      long r = sys::raw3(SYS_close_range, lo, o - 1, flags);
      if (r < 0) return r;
    }
    if (o == ~0u) return 0;
    lo = o + 1;
  }
  if (lo > last) return 0;
  return sys::raw3(SYS_close_range, lo, last, flags);
}

void fdop_closefrom(int lowfd) {
  if (lowfd < 0) lowfd = 0;
  fdop_close_range((unsigned)lowfd, ~0u, 0);
}

// ---- sockets ----------------------------------------------------------------------------------

long fdop_shutdown(int fd, int how) {
  long r = sys::shutdown(fd, how);
  if (r < 0) return r;
  // The kernel wakes its own waiters; goshim's retry their calls.
  PollDesc* pd = fd_peek(fd);
  if (pd) {
    int err;
    pd = fd_get(fd, &err);
    if (pd) {
      FileRec* f = pd->file;
      if (f->flags.load(std::memory_order_acquire) & kFileChan) file_chan_bump(f);
      FileRec* peer = __atomic_load_n(&f->peer, __ATOMIC_ACQUIRE);
      if (peer) file_chan_bump(peer);
      pd_wake_all(pd);
      pd_put(pd);
    }
  }
  return r;
}

long fdop_setsockopt(int fd, int level, int name, const void* val, socklen_t len) {
  long r = sys::setsockopt(fd, level, name, val, len);
  if (r < 0 || level != SOL_SOCKET) return r;
  if (name == SO_RCVTIMEO_OLD || name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_OLD ||
      name == SO_SNDTIMEO_NEW) {
    int64_t ns = tv_ns(val, len);
    int err;
    PollDesc* pd = ns >= 0 ? fd_get(fd, &err) : nullptr;
    if (pd) {
      bool rcv = name == SO_RCVTIMEO_OLD || name == SO_RCVTIMEO_NEW;
      (rcv ? pd->file->rcvtimeo : pd->file->sndtimeo).store(ns, std::memory_order_relaxed);
      pd_put(pd);
    }
  } else if (name == SO_RCVLOWAT) {
    fd_taint(fd);  // a reader waits for more than one write: no handoff
  }
  return r;
}

void fdop_before_sendmsg(const struct msghdr* m) {
  if (!m || !m->msg_control || m->msg_controllen < sizeof(struct cmsghdr)) return;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr*)m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const int* fds = (const int*)CMSG_DATA(c);
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    // The receiver must see the file as this program sees it.
    for (size_t i = 0; i < n; i++) fd_release_to_kernel(fds[i]);
  }
}

void fdop_before_fdopen(int fd) { fd_release_to_kernel(fd); }

}  // namespace goshim
