// fork and _Fork: the child gets a freshly reset runtime (core/fork.hpp).
// glibc's fork runs the pthread_atfork handlers, in its order, around the
// clone; goshim's child handler (registered at start-up) resets the
// runtime; this wrapper makes sure it ran (it does not for _Fork, which
// runs no handlers). vfork is this fork (shim/exec.cpp). posix_spawn,
// system and popen run no code of the program in their child; their
// parent side hands inheritable fds back to the kernel
// (shim/blocking_calls.cpp).
#include <unistd.h>

#include "core/fork.hpp"
#include "core/real.hpp"
#include "core/rtlock.hpp"
#include "shim/shim.hpp"

using namespace goshim;

GOSHIM_EXPORT pid_t fork(void) {
  pid_t pid = real::lazy::fork()();
  if (pid == 0 && mn_active()) {
    fork_child_reset();
    rt_after_fork();
  }
  return pid;
}

GOSHIM_EXPORT pid_t _Fork(void) {
  pid_t pid = real::lazy::_Fork()();
  if (pid == 0 && mn_active()) {
    fork_child_reset();
    rt_after_fork();
  }
  return pid;
}
