// The real libc functions behind the fd-layer interposers (socket I/O,
// poll family, sleeps, fd lifetime), resolved with dlsym(RTLD_NEXT) by
// real::resolve(). shim/ calls them to pass a call through unchanged:
// before init, on foreign kernel threads, on g0, in 1:1 mode. Going through
// libc (not a raw syscall) keeps glibc's cancellation points and argument
// conventions for those callers.
#pragma once

#include <poll.h>
#include <spawn.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

namespace goshim::real {

#define GOSHIM_REAL_IO_FUNCS(X)                                                                 \
  X(ssize_t, read, (int, void*, size_t))                                                        \
  X(ssize_t, write, (int, const void*, size_t))                                                 \
  X(ssize_t, readv, (int, const struct iovec*, int))                                            \
  X(ssize_t, writev, (int, const struct iovec*, int))                                           \
  X(ssize_t, pread, (int, void*, size_t, off_t))                                                \
  X(ssize_t, pwrite, (int, const void*, size_t, off_t))                                         \
  X(ssize_t, preadv, (int, const struct iovec*, int, off_t))                                    \
  X(ssize_t, pwritev, (int, const struct iovec*, int, off_t))                                   \
  X(ssize_t, preadv2, (int, const struct iovec*, int, off_t, int))                              \
  X(ssize_t, pwritev2, (int, const struct iovec*, int, off_t, int))                             \
  X(ssize_t, recv, (int, void*, size_t, int))                                                   \
  X(ssize_t, recvfrom, (int, void*, size_t, int, struct sockaddr*, socklen_t*))                 \
  X(ssize_t, recvmsg, (int, struct msghdr*, int))                                               \
  X(int, recvmmsg, (int, struct mmsghdr*, unsigned int, int, struct timespec*))                 \
  X(ssize_t, send, (int, const void*, size_t, int))                                             \
  X(ssize_t, sendto, (int, const void*, size_t, int, const struct sockaddr*, socklen_t))        \
  X(ssize_t, sendmsg, (int, const struct msghdr*, int))                                         \
  X(int, sendmmsg, (int, struct mmsghdr*, unsigned int, int))                                   \
  X(int, accept, (int, struct sockaddr*, socklen_t*))                                           \
  X(int, accept4, (int, struct sockaddr*, socklen_t*, int))                                     \
  X(int, connect, (int, const struct sockaddr*, socklen_t))                                     \
  X(ssize_t, sendfile, (int, int, off_t*, size_t))                                              \
  X(ssize_t, splice, (int, loff_t*, int, loff_t*, size_t, unsigned int))                        \
  X(ssize_t, tee, (int, int, size_t, unsigned int))                                             \
  X(ssize_t, vmsplice, (int, const struct iovec*, size_t, unsigned int))                        \
  X(int, poll, (struct pollfd*, nfds_t, int))                                                   \
  X(int, ppoll, (struct pollfd*, nfds_t, const struct timespec*, const sigset_t*))              \
  X(int, select, (int, fd_set*, fd_set*, fd_set*, struct timeval*))                             \
  X(int, pselect, (int, fd_set*, fd_set*, fd_set*, const struct timespec*, const sigset_t*))    \
  X(int, epoll_wait, (int, struct epoll_event*, int, int))                                      \
  X(int, epoll_pwait, (int, struct epoll_event*, int, int, const sigset_t*))                    \
  X(int, epoll_pwait2, (int, struct epoll_event*, int, const struct timespec*, const sigset_t*)) \
  X(int, fcntl, (int, int, ...))                                                                \
  X(int, ioctl, (int, unsigned long, ...))                                                      \
  X(int, close, (int))                                                                          \
  X(int, close_range, (unsigned int, unsigned int, int))                                        \
  X(void, closefrom, (int))                                                                     \
  X(FILE*, fdopen, (int, const char*))                                                          \
  X(unsigned int, sleep, (unsigned int))                                                        \
  X(int, usleep, (useconds_t))                                                                  \
  X(int, nanosleep, (const struct timespec*, struct timespec*))                                 \
  X(int, clock_nanosleep, (clockid_t, int, const struct timespec*, struct timespec*))         \
  X(int, open, (const char*, int, ...))                                                         \
  X(int, open64, (const char*, int, ...))                                                       \
  X(int, openat, (int, const char*, int, ...))                                                  \
  X(int, openat64, (int, const char*, int, ...))                                                \
  X(int, creat, (const char*, mode_t))                                                          \
  X(int, creat64, (const char*, mode_t))                                                        \
  X(int, __open_2, (const char*, int))                                                          \
  X(int, __open64_2, (const char*, int))                                                        \
  X(int, __openat_2, (int, const char*, int))                                                   \
  X(int, __openat64_2, (int, const char*, int))                                                \
  X(int, posix_spawn_file_actions_adddup2, (posix_spawn_file_actions_t*, int, int))             \
  X(int, execve, (const char*, char* const*, char* const*))                                     \
  X(int, execv, (const char*, char* const*))                                                    \
  X(int, execvp, (const char*, char* const*))                                                   \
  X(int, execvpe, (const char*, char* const*, char* const*))                                    \
  X(int, fexecve, (int, char* const*, char* const*))                                            \
  X(int, execveat, (int, const char*, char* const*, char* const*, int))

#define GOSHIM_REAL_DECL(ret, name, args) extern ret(*name) args;
GOSHIM_REAL_IO_FUNCS(GOSHIM_REAL_DECL)
#undef GOSHIM_REAL_DECL

// Resolves every entry (called by real::resolve). Any thread; idempotent.
void resolve_io();

}  // namespace goshim::real
