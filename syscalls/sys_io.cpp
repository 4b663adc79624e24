// Raw I/O system calls (see sys_io.hpp).
#include "syscalls/sys_io.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>

#include "syscalls/sys.hpp"

namespace goshim::sys {

long readv(int fd, const struct iovec* iov, int cnt) {
  return raw3(SYS_readv, fd, (long)iov, cnt);
}
long writev(int fd, const struct iovec* iov, int cnt) {
  return raw3(SYS_writev, fd, (long)iov, cnt);
}
long pread(int fd, void* buf, size_t n, long off) {
  return raw4(SYS_pread64, fd, (long)buf, (long)n, off);
}
long pwrite(int fd, const void* buf, size_t n, long off) {
  return raw4(SYS_pwrite64, fd, (long)buf, (long)n, off);
}
// The kernel takes the offset split in two longs (pos_l, pos_h); on 64-bit
// the low one carries it all. Where the *v2 calls do not exist (ENOSYS: a
// kernel before 4.6, qemu-user 7.2), glibc's preadv2/pwritev2 fall back to
// preadv/pwritev without flags and fail with EOPNOTSUPP with them; so do
// these (goshim's preadv and pwritev come here with flags 0).
long preadv2(int fd, const struct iovec* iov, int cnt, long off, int flags) {
  long r = raw6(SYS_preadv2, fd, (long)iov, cnt, off, 0, flags);
  if (r != -ENOSYS) return r;
  if (flags != 0) return -EOPNOTSUPP;
  return raw5(SYS_preadv, fd, (long)iov, cnt, off, 0);
}
long pwritev2(int fd, const struct iovec* iov, int cnt, long off, int flags) {
  long r = raw6(SYS_pwritev2, fd, (long)iov, cnt, off, 0, flags);
  if (r != -ENOSYS) return r;
  if (flags != 0) return -EOPNOTSUPP;
  return raw5(SYS_pwritev, fd, (long)iov, cnt, off, 0);
}
long recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* a, socklen_t* alen) {
  return raw6(SYS_recvfrom, fd, (long)buf, (long)n, flags, (long)a, (long)alen);
}
long sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* a,
            socklen_t alen) {
  return raw6(SYS_sendto, fd, (long)buf, (long)n, flags, (long)a, (long)alen);
}
long recvmsg(int fd, struct msghdr* m, int flags) { return raw3(SYS_recvmsg, fd, (long)m, flags); }
long sendmsg(int fd, const struct msghdr* m, int flags) {
  return raw3(SYS_sendmsg, fd, (long)m, flags);
}
long recvmmsg(int fd, struct mmsghdr* v, unsigned n, int flags, struct timespec* t) {
  return raw5(SYS_recvmmsg, fd, (long)v, n, flags, (long)t);
}
long sendmmsg(int fd, struct mmsghdr* v, unsigned n, int flags) {
  return raw4(SYS_sendmmsg, fd, (long)v, n, flags);
}
long accept4(int fd, struct sockaddr* a, socklen_t* alen, int flags) {
  return raw4(SYS_accept4, fd, (long)a, (long)alen, flags);
}
long connect(int fd, const struct sockaddr* a, socklen_t alen) {
  return raw3(SYS_connect, fd, (long)a, alen);
}
long shutdown(int fd, int how) { return raw2(SYS_shutdown, fd, how); }
long socket(int domain, int type, int proto) { return raw3(SYS_socket, domain, type, proto); }
long socketpair(int domain, int type, int proto, int sv[2]) {
  return raw4(SYS_socketpair, domain, type, proto, (long)sv);
}
long getsockopt(int fd, int level, int name, void* val, socklen_t* len) {
  return raw5(SYS_getsockopt, fd, level, name, (long)val, (long)len);
}
long setsockopt(int fd, int level, int name, const void* val, socklen_t len) {
  return raw5(SYS_setsockopt, fd, level, name, (long)val, len);
}
long getsockname(int fd, struct sockaddr* a, socklen_t* alen) {
  return raw3(SYS_getsockname, fd, (long)a, (long)alen);
}
long sendfile(int out, int in, off_t* off, size_t n) {
  return raw4(SYS_sendfile, out, in, (long)off, (long)n);
}
long splice(int in, loff_t* offin, int out, loff_t* offout, size_t n, unsigned flags) {
  return raw6(SYS_splice, in, (long)offin, out, (long)offout, (long)n, flags);
}
long tee(int in, int out, size_t n, unsigned flags) {
  return raw4(SYS_tee, in, out, (long)n, flags);
}
long vmsplice(int fd, const struct iovec* iov, unsigned long cnt, unsigned flags) {
  return raw4(SYS_vmsplice, fd, (long)iov, (long)cnt, flags);
}
long pipe2(int fds[2], int flags) { return raw2(SYS_pipe2, (long)fds, flags); }
long dup(int fd) { return raw1(SYS_dup, fd); }
long dup3(int oldfd, int newfd, int flags) { return raw3(SYS_dup3, oldfd, newfd, flags); }
long fcntl(int fd, int cmd, long arg) { return raw3(SYS_fcntl, fd, cmd, arg); }
long ioctl(int fd, unsigned long req, long arg) { return raw3(SYS_ioctl, fd, (long)req, arg); }
long fstat(int fd, struct stat* st) { return raw2(SYS_fstat, fd, (long)st); }
long ppoll(struct pollfd* fds, unsigned long n, const struct timespec* ts, const void* sigmask) {
  return raw5(SYS_ppoll, (long)fds, (long)n, (long)ts, (long)sigmask, 8);
}
long pselect6(int n, void* r, void* w, void* e, const struct timespec* ts, const void* sig) {
  return raw6(SYS_pselect6, n, (long)r, (long)w, (long)e, (long)ts, (long)sig);
}
long epoll_pwait(int epfd, struct epoll_event* ev, int max, int ms, const void* sigmask) {
  return raw6(SYS_epoll_pwait, epfd, (long)ev, max, ms, (long)sigmask, 8);
}
void proc_fd_path(int fd, char (&path)[32]) {
  static const char kPrefix[] = "/proc/self/fd/";
  size_t n = 0;
  for (; kPrefix[n]; n++) path[n] = kPrefix[n];
  char digits[12];
  int nd = 0;
  unsigned v = (unsigned)fd;
  do {
    digits[nd++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (nd) path[n++] = digits[--nd];
  path[n] = 0;
}

long readlink_fd(int fd, char* buf, size_t size) {
  char path[32];
  proc_fd_path(fd, path);
  return raw4(SYS_readlinkat, AT_FDCWD, (long)path, (long)buf, (long)size);
}

}  // namespace goshim::sys
