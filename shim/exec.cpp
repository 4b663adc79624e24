// The exec family and vfork.
//
// exec: goshim keeps the pipes and sockets the program created O_NONBLOCK
// underneath (core/fdtable.hpp); a program exec'ed with one of them as an
// inherited fd (a fork child's stdin, typically) must find it blocking, as
// it would natively. Each exec function first gives every inheritable fd
// of that kind a blocking file (fd_before_exec: a pipe a description of
// its own, so the parent sharing the old one is not disturbed), then calls
// glibc's; if the exec fails, the change is undone. These run in fork
// children and may run in signal handlers: no allocation, no lock (the
// argument vectors of the execl forms are on the stack, as in glibc).
//
// vfork is fork: a vfork child runs on the parent's goroutine stack with
// its TLS, and every interposed call it makes before exec (dup2, close,
// the exec preparation itself) would change the parent's runtime state (fd
// table, epoll registrations). POSIX allows vfork to be fork.
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#include "core/fdtable.hpp"
#include "core/real.hpp"
#include "core/sharedwatch.hpp"
#include "shim/shim.hpp"

using namespace goshim;

namespace {

// Before every exec: the fds (above) and the watchers of process-shared
// words, which would lose a wake they hold (shim/process_exit.cpp).
inline void before_exec() {
  fd_before_exec();
  watch_quiesce();
}

inline int failed(int r) {
  int e = errno;
  watch_resume();
  fd_exec_failed();
  errno = e;
  return r;
}

inline int enosys() {
  errno = ENOSYS;
  return -1;
}

}  // namespace

extern "C" char** environ;
GOSHIM_EXPORT pid_t fork(void);

GOSHIM_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  shim::ensure_real();
  before_exec();
  return failed(real::execve(path, argv, envp));
}

GOSHIM_EXPORT int execv(const char* path, char* const argv[]) {
  shim::ensure_real();
  before_exec();
  return failed(real::execv(path, argv));
}

GOSHIM_EXPORT int execvp(const char* file, char* const argv[]) {
  shim::ensure_real();
  before_exec();
  return failed(real::execvp(file, argv));
}

GOSHIM_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  shim::ensure_real();
  before_exec();
  return failed(real::execvpe(file, argv, envp));
}

GOSHIM_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  shim::ensure_real();
  before_exec();
  return failed(real::fexecve(fd, argv, envp));
}

GOSHIM_EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                           int flags) {
  shim::ensure_real();
  if (!real::execveat) return enosys();
  before_exec();
  return failed(real::execveat(dirfd, path, argv, envp, flags));
}

// execl, execlp, execle: the arguments up to the terminating null pointer
// become an argv on the stack (and execle's envp follows that null).
#define GOSHIM_COUNT_ARGS(arg, n)                       \
  size_t n = 1;                                         \
  {                                                     \
    va_list ap;                                         \
    va_start(ap, arg);                                  \
    while (va_arg(ap, const char*) != nullptr) n++;     \
    va_end(ap);                                         \
  }

// alloca, not a variable-length array: C++ has none (clang 18 and later
// warn about the extension in -Wall).
#define GOSHIM_FILL_ARGS(arg, n, argv, ap)                           \
  char** argv = (char**)__builtin_alloca((n + 1) * sizeof(char*)); \
  argv[0] = (char*)arg;                    \
  va_list ap;                              \
  va_start(ap, arg);                       \
  for (size_t i = 1; i <= n; i++) argv[i] = va_arg(ap, char*);

GOSHIM_EXPORT int execl(const char* path, const char* arg, ...) {
  GOSHIM_COUNT_ARGS(arg, n)
  GOSHIM_FILL_ARGS(arg, n, argv, ap)
  va_end(ap);
  return execve(path, argv, environ);
}

GOSHIM_EXPORT int execlp(const char* file, const char* arg, ...) {
  GOSHIM_COUNT_ARGS(arg, n)
  GOSHIM_FILL_ARGS(arg, n, argv, ap)
  va_end(ap);
  return execvp(file, argv);
}

GOSHIM_EXPORT int execle(const char* path, const char* arg, ...) {
  GOSHIM_COUNT_ARGS(arg, n)
  GOSHIM_FILL_ARGS(arg, n, argv, ap)
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return execve(path, argv, envp);
}

GOSHIM_EXPORT pid_t vfork(void) { return fork(); }
GOSHIM_EXPORT pid_t __vfork(void) { return fork(); }
