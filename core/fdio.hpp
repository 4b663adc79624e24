// Blocking I/O that parks only the goroutine (DESIGN.md decision 5): the
// try / park on the poll descriptor / retry loop behind every interposed
// read, write, send, recv, accept, connect, sendfile and splice (libfibre's
// syncIO, Go's poll.FD methods).
//
// Every io_* function below works from any thread and returns the kernel's
// convention (>= 0, or -errno); shim/ only converts that to errno:
//   - on a goroutine: the fd is kept O_NONBLOCK underneath; EAGAIN parks
//     the goroutine in netpoll (SO_RCVTIMEO/SO_SNDTIMEO as deadlines,
//     signals as EINTR or restart per SA_RESTART); a program that set
//     O_NONBLOCK itself gets its EAGAIN. Regular files run as blocking
//     calls (BlockingCall, Short). Files goshim must not switch (inherited
//     ones) wait for readiness in netpoll, then run as blocking calls.
//   - off a goroutine (before init, foreign kernel threads, g0): the real
//     libc function; on an fd goshim keeps O_NONBLOCK underneath, the
//     blocking behaviour is emulated with the real poll().
//
// Same-process pipes and stream socketpairs: a plain write to an end whose
// peer has a goroutine parked in a plain read, while the kernel buffer is
// known to be empty, copies the bytes straight into the reader's buffer and
// readies it (no syscall, no epoll). FileRec::chan (fdtable.hpp) is the
// "known empty" state; writes that reach the kernel change it before and
// after the syscall, and a reader clears it only after seeing EAGAIN with
// a CAS from the value it read before its attempt:
//
//   writer (kernel path)                  reader
//   --------------------                  ------
//   chan = (gen+1) | 1          [S1]      c = chan                    [L1]
//   write(2)                              c & 1 ? read(2) : park (first pass)
//   chan = (gen+1) | 1          [S2]      EAGAIN: CAS chan c -> c & ~1
//
// A reader that loaded chan before S1 and parked without a syscall is
// woken by the epoll edge of the write; one that read EAGAIN before the
// write landed fails its CAS (S2 changed chan) or ran after S2. A writer
// hands off only while chan & 1 == 0, so data never overtakes data already
// in the kernel buffer. This needs every writer into the pipe to go through
// goshim: pairs are "tainted" (no handoff) once an end may be written by
// others (fdopen, SCM_RIGHTS, fork/spawn/exec: fdtable.hpp).
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

namespace goshim {

long io_read(int fd, void* buf, size_t n);
long io_write(int fd, const void* buf, size_t n);
long io_readv(int fd, const struct iovec* iov, int cnt);
long io_writev(int fd, const struct iovec* iov, int cnt);
// pread/pwrite family: offset < 0 only for preadv2/pwritev2 (current position).
long io_preadv2(int fd, const struct iovec* iov, int cnt, long off, int flags);
long io_pwritev2(int fd, const struct iovec* iov, int cnt, long off, int flags);
long io_pread(int fd, void* buf, size_t n, long off);
long io_pwrite(int fd, const void* buf, size_t n, long off);
long io_recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* a, socklen_t* alen);
long io_sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* a,
               socklen_t alen);
long io_recvmsg(int fd, struct msghdr* m, int flags);
long io_sendmsg(int fd, const struct msghdr* m, int flags);
long io_recvmmsg(int fd, struct mmsghdr* v, unsigned n, int flags, struct timespec* t);
long io_sendmmsg(int fd, struct mmsghdr* v, unsigned n, int flags);
long io_accept4(int fd, struct sockaddr* a, socklen_t* alen, int flags);
long io_connect(int fd, const struct sockaddr* a, socklen_t alen);
long io_sendfile(int out, int in, off_t* off, size_t n);
long io_splice(int in, loff_t* offin, int out, loff_t* offout, size_t n, unsigned flags);
long io_tee(int in, int out, size_t n, unsigned flags);
long io_vmsplice(int fd, const struct iovec* iov, unsigned long cnt, unsigned flags);

}  // namespace goshim
