// Blocking I/O on fds: read/write and friends, the socket calls, sendfile
// and splice. Each is one call into core/fdio (which also serves foreign
// threads and pre-init callers with the real libc function).
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/fdio.hpp"
#include "core/fdops.hpp"
#include "shim/io.hpp"

using namespace goshim;
using shim::set_errno;

// ---- read / write ---------------------------------------------------------------------------

GOSHIM_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_read(fd, buf, n));
}
GOSHIM_EXPORT ssize_t __read(int fd, void* buf, size_t n) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_read(fd, buf, n));
}
GOSHIM_EXPORT ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  GOSHIM_IO_ENTRY();
  if (n > buflen) __chk_fail();
  return set_errno(io_read(fd, buf, n));
}

GOSHIM_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_write(fd, buf, n));
}
GOSHIM_EXPORT ssize_t __write(int fd, const void* buf, size_t n) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_write(fd, buf, n));
}

GOSHIM_EXPORT ssize_t readv(int fd, const struct iovec* iov, int cnt) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_readv(fd, iov, cnt));
}
GOSHIM_EXPORT ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_writev(fd, iov, cnt));
}

// Positioned I/O: regular files as blocking calls; on pipes and sockets
// the kernel answers ESPIPE, as natively.
GOSHIM_EXPORT ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_pread(fd, buf, n, off));
}
GOSHIM_EXPORT ssize_t pread64(int fd, void* buf, size_t n, off_t off) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_pread(fd, buf, n, off));
}
GOSHIM_EXPORT ssize_t __pread64(int fd, void* buf, size_t n, off_t off) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_pread(fd, buf, n, off));
}
GOSHIM_EXPORT ssize_t __pread_chk(int fd, void* buf, size_t n, off_t off, size_t buflen) {
  GOSHIM_IO_ENTRY();
  if (n > buflen) __chk_fail();
  return set_errno(io_pread(fd, buf, n, off));
}
GOSHIM_EXPORT ssize_t __pread64_chk(int fd, void* buf, size_t n, off_t off, size_t buflen) {
  GOSHIM_IO_ENTRY();
  if (n > buflen) __chk_fail();
  return set_errno(io_pread(fd, buf, n, off));
}
GOSHIM_EXPORT ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_pwrite(fd, buf, n, off));
}
GOSHIM_EXPORT ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_pwrite(fd, buf, n, off));
}
GOSHIM_EXPORT ssize_t __pwrite64(int fd, const void* buf, size_t n, off_t off) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_pwrite(fd, buf, n, off));
}
// preadv/pwritev take the offset as is (negative: EINVAL); only the *v2
// calls read -1 as "the current position".
GOSHIM_EXPORT ssize_t preadv(int fd, const struct iovec* iov, int cnt, off_t off) {
  GOSHIM_IO_ENTRY();
  if (off < 0) return set_errno(-EINVAL);
  return set_errno(io_preadv2(fd, iov, cnt, off, 0));
}
GOSHIM_EXPORT ssize_t preadv64(int fd, const struct iovec* iov, int cnt, off_t off) {
  GOSHIM_IO_ENTRY();
  if (off < 0) return set_errno(-EINVAL);
  return set_errno(io_preadv2(fd, iov, cnt, off, 0));
}
GOSHIM_EXPORT ssize_t pwritev(int fd, const struct iovec* iov, int cnt, off_t off) {
  GOSHIM_IO_ENTRY();
  if (off < 0) return set_errno(-EINVAL);
  return set_errno(io_pwritev2(fd, iov, cnt, off, 0));
}
GOSHIM_EXPORT ssize_t pwritev64(int fd, const struct iovec* iov, int cnt, off_t off) {
  GOSHIM_IO_ENTRY();
  if (off < 0) return set_errno(-EINVAL);
  return set_errno(io_pwritev2(fd, iov, cnt, off, 0));
}
GOSHIM_EXPORT ssize_t preadv2(int fd, const struct iovec* iov, int cnt, off_t off, int flags) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_preadv2(fd, iov, cnt, off, flags));
}
GOSHIM_EXPORT ssize_t preadv64v2(int fd, const struct iovec* iov, int cnt, off_t off, int flags) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_preadv2(fd, iov, cnt, off, flags));
}
GOSHIM_EXPORT ssize_t pwritev2(int fd, const struct iovec* iov, int cnt, off_t off, int flags) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_pwritev2(fd, iov, cnt, off, flags));
}
GOSHIM_EXPORT ssize_t pwritev64v2(int fd, const struct iovec* iov, int cnt, off_t off, int flags) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_pwritev2(fd, iov, cnt, off, flags));
}

// ---- sockets --------------------------------------------------------------------------------

GOSHIM_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_recvfrom(fd, buf, n, flags, nullptr, nullptr));
}
GOSHIM_EXPORT ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  GOSHIM_IO_ENTRY();
  if (n > buflen) __chk_fail();
  return set_errno(io_recvfrom(fd, buf, n, flags, nullptr, nullptr));
}
GOSHIM_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* a,
                               socklen_t* alen) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_recvfrom(fd, buf, n, flags, a, alen));
}
GOSHIM_EXPORT ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags,
                                     struct sockaddr* a, socklen_t* alen) {
  GOSHIM_IO_ENTRY();
  if (n > buflen) __chk_fail();
  return set_errno(io_recvfrom(fd, buf, n, flags, a, alen));
}
GOSHIM_EXPORT ssize_t recvmsg(int fd, struct msghdr* m, int flags) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_recvmsg(fd, m, flags));
}
GOSHIM_EXPORT int recvmmsg(int fd, struct mmsghdr* v, unsigned int n, int flags,
                           struct timespec* t) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(io_recvmmsg(fd, v, n, flags, t));
}

GOSHIM_EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_sendto(fd, buf, n, flags, nullptr, 0));
}
GOSHIM_EXPORT ssize_t __send(int fd, const void* buf, size_t n, int flags) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_sendto(fd, buf, n, flags, nullptr, 0));
}
GOSHIM_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags,
                             const struct sockaddr* a, socklen_t alen) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_sendto(fd, buf, n, flags, a, alen));
}
GOSHIM_EXPORT ssize_t sendmsg(int fd, const struct msghdr* m, int flags) {
  GOSHIM_IO_ENTRY();
  fdop_before_sendmsg(m);
  return set_errno(io_sendmsg(fd, m, flags));
}
GOSHIM_EXPORT int sendmmsg(int fd, struct mmsghdr* v, unsigned int n, int flags) {
  GOSHIM_IO_ENTRY();
  for (unsigned i = 0; v && i < n; i++) fdop_before_sendmsg(&v[i].msg_hdr);
  return (int)set_errno(io_sendmmsg(fd, v, n, flags));
}

GOSHIM_EXPORT int accept(int fd, struct sockaddr* a, socklen_t* alen) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(io_accept4(fd, a, alen, 0));
}
GOSHIM_EXPORT int accept4(int fd, struct sockaddr* a, socklen_t* alen, int flags) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(io_accept4(fd, a, alen, flags));
}
GOSHIM_EXPORT int connect(int fd, const struct sockaddr* a, socklen_t alen) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(io_connect(fd, a, alen));
}
GOSHIM_EXPORT int __connect(int fd, const struct sockaddr* a, socklen_t alen) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(io_connect(fd, a, alen));
}
GOSHIM_EXPORT int shutdown(int fd, int how) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_shutdown(fd, how));
}
GOSHIM_EXPORT int setsockopt(int fd, int level, int name, const void* val, socklen_t len) {
  GOSHIM_IO_ENTRY();
  return (int)set_errno(fdop_setsockopt(fd, level, name, val, len));
}

// ---- zero-copy --------------------------------------------------------------------------------

GOSHIM_EXPORT ssize_t sendfile(int out, int in, off_t* off, size_t n) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_sendfile(out, in, off, n));
}
GOSHIM_EXPORT ssize_t sendfile64(int out, int in, off_t* off, size_t n) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_sendfile(out, in, off, n));
}
GOSHIM_EXPORT ssize_t splice(int in, loff_t* offin, int out, loff_t* offout, size_t n,
                             unsigned int flags) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_splice(in, offin, out, offout, n, flags));
}
GOSHIM_EXPORT ssize_t tee(int in, int out, size_t n, unsigned int flags) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_tee(in, out, n, flags));
}
GOSHIM_EXPORT ssize_t vmsplice(int fd, const struct iovec* iov, size_t cnt, unsigned int flags) {
  GOSHIM_IO_ENTRY();
  return set_errno(io_vmsplice(fd, iov, cnt, flags));
}
