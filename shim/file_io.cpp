// Opening files: open, openat, creat and their 64-bit and fortified names
// run as blocking calls on a goroutine (a FIFO's open waits for the other
// end, NFS for the server), and the number's old fd-table record is
// forgotten (its file was closed behind goshim's back, inside libc); the
// new file is classified on first use. Regular-file read/write go through
// shim/socket_io.cpp like every fd call.
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>

#include "core/fdtable.hpp"
#include "core/real.hpp"
#include "shim/io.hpp"
#include "syscalls/blocking.hpp"

using namespace goshim;

namespace {

// open's mode argument exists only with O_CREAT or O_TMPFILE.
inline bool has_mode(int flags) { return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE; }

inline int opened(int fd) {
  if (fd >= 0) fd_forget(fd);
  return fd;
}

}  // namespace

// OPEN(CALL): runs CALL (the real function) as a blocking call on a goroutine.
#define GOSHIM_OPEN(CALL)                                       \
  shim::ensure_real();                                          \
  if (shim::user_g()) {                                         \
    int fd_ = blocking_cancellable(BlockKind::Short, "open",    \
                                   [&] { return CALL; });       \
    return opened(fd_);                                         \
  }                                                             \
  return opened(CALL)

GOSHIM_EXPORT int open(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (has_mode(flags)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  GOSHIM_OPEN(real::open(path, flags, mode));
}

GOSHIM_EXPORT int open64(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (has_mode(flags)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  GOSHIM_OPEN(real::open64(path, flags, mode));
}

GOSHIM_EXPORT int openat(int dirfd, const char* path, int flags, ...) {
  mode_t mode = 0;
  if (has_mode(flags)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  GOSHIM_OPEN(real::openat(dirfd, path, flags, mode));
}

GOSHIM_EXPORT int openat64(int dirfd, const char* path, int flags, ...) {
  mode_t mode = 0;
  if (has_mode(flags)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  GOSHIM_OPEN(real::openat64(dirfd, path, flags, mode));
}

GOSHIM_EXPORT int creat(const char* path, mode_t mode) { GOSHIM_OPEN(real::creat(path, mode)); }
GOSHIM_EXPORT int creat64(const char* path, mode_t mode) {
  GOSHIM_OPEN(real::creat64(path, mode));
}
GOSHIM_EXPORT int __open_2(const char* path, int flags) {
  GOSHIM_OPEN(real::__open_2(path, flags));
}
GOSHIM_EXPORT int __open64_2(const char* path, int flags) {
  GOSHIM_OPEN(real::__open64_2(path, flags));
}
GOSHIM_EXPORT int __openat_2(int dirfd, const char* path, int flags) {
  GOSHIM_OPEN(real::__openat_2(dirfd, path, flags));
}
GOSHIM_EXPORT int __openat64_2(int dirfd, const char* path, int flags) {
  GOSHIM_OPEN(real::__openat64_2(dirfd, path, flags));
}

// A file that posix_spawn will give a child as one of its fds: the child
// must see it as this program does (blocking, unless it set O_NONBLOCK).
GOSHIM_EXPORT int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t* fa, int fd,
                                                   int newfd) {
  GOSHIM_IO_ENTRY();
  fd_release_to_kernel(fd);
  shim::ensure_real();
  return real::posix_spawn_file_actions_adddup2(fa, fd, newfd);
}
