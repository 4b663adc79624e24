// Raw system calls for the fd layer (netpoll, fd table, socket I/O): the
// same contract as sys.hpp (kernel result, >= 0 or -errno; errno untouched;
// no libc, no lock, no allocation), kept apart from sys.hpp so that the
// I/O family lives in one place.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct iovec;
struct msghdr;
struct mmsghdr;
struct sockaddr;
struct stat;
struct pollfd;
struct timespec;
struct epoll_event;

namespace goshim::sys {

long readv(int fd, const struct iovec* iov, int cnt);
long writev(int fd, const struct iovec* iov, int cnt);
long pread(int fd, void* buf, size_t n, long off);
long pwrite(int fd, const void* buf, size_t n, long off);
long preadv2(int fd, const struct iovec* iov, int cnt, long off, int flags);
long pwritev2(int fd, const struct iovec* iov, int cnt, long off, int flags);
long recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* a, socklen_t* alen);
long sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* a, socklen_t alen);
long recvmsg(int fd, struct msghdr* m, int flags);
long sendmsg(int fd, const struct msghdr* m, int flags);
long recvmmsg(int fd, struct mmsghdr* v, unsigned n, int flags, struct timespec* t);
long sendmmsg(int fd, struct mmsghdr* v, unsigned n, int flags);
long accept4(int fd, struct sockaddr* a, socklen_t* alen, int flags);
long connect(int fd, const struct sockaddr* a, socklen_t alen);
long shutdown(int fd, int how);
long socket(int domain, int type, int proto);
long socketpair(int domain, int type, int proto, int sv[2]);
long getsockopt(int fd, int level, int name, void* val, socklen_t* len);
long setsockopt(int fd, int level, int name, const void* val, socklen_t len);
long getsockname(int fd, struct sockaddr* a, socklen_t* alen);
long sendfile(int out, int in, off_t* off, size_t n);
long splice(int in, loff_t* offin, int out, loff_t* offout, size_t n, unsigned flags);
long tee(int in, int out, size_t n, unsigned flags);
long vmsplice(int fd, const struct iovec* iov, unsigned long cnt, unsigned flags);
long pipe2(int fds[2], int flags);
long dup(int fd);
long dup3(int oldfd, int newfd, int flags);
long fcntl(int fd, int cmd, long arg);
long ioctl(int fd, unsigned long req, long arg);
long fstat(int fd, struct stat* st);
long ppoll(struct pollfd* fds, unsigned long n, const struct timespec* ts, const void* sigmask);
long pselect6(int n, void* r, void* w, void* e, const struct timespec* ts, const void* sig);
long epoll_pwait(int epfd, struct epoll_event* ev, int max, int ms, const void* sigmask);
// "/proc/self/fd/N" (no allocation, no libc: usable before exec).
void proc_fd_path(int fd, char (&path)[32]);
long readlink_fd(int fd, char* buf, size_t size);  // readlink("/proc/self/fd/N")

}  // namespace goshim::sys
