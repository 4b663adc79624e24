// fork and _Fork: the child gets a freshly reset runtime (core/fork.hpp).
// glibc's fork runs the pthread_atfork handlers, in its order, around the
// clone; goshim's child handler (registered at start-up) resets the
// runtime; this wrapper makes sure it ran (it does not for _Fork, which
// runs no handlers). vfork is this fork (shim/exec.cpp). posix_spawn,
// system and popen run no code of the program in their child; their
// parent side hands inheritable fds back to the kernel
// (shim/blocking_calls.cpp).
#include <dlfcn.h>
#include <unistd.h>

#include "core/fork.hpp"
#include "core/rtlock.hpp"
#include "shim/shim.hpp"

using namespace goshim;

namespace {
using fork_fn = pid_t (*)(void);
}

GOSHIM_EXPORT pid_t fork(void) {
  static fork_fn real_fork;
  if (!real_fork) real_fork = (fork_fn)dlsym(RTLD_NEXT, "fork");
  pid_t pid = real_fork();
  if (pid == 0 && mn_active()) {
    fork_child_reset();
    rt_after_fork();
  }
  return pid;
}

GOSHIM_EXPORT pid_t _Fork(void) {
  static fork_fn real_fork;
  if (!real_fork) real_fork = (fork_fn)dlsym(RTLD_NEXT, "_Fork");
  pid_t pid = real_fork();
  if (pid == 0 && mn_active()) {
    fork_child_reset();
    rt_after_fork();
  }
  return pid;
}
