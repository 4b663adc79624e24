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
#include "core/pi.hpp"
#include "core/real.hpp"
#include "core/rtlock.hpp"
#include "shim/shim.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {
// Around glibc's fork or _Fork (their child-side duties differ: see
// fork_child_reset_1to1). goshim's threads in the child are started after
// the program's atfork child handlers when the allocator is the
// program's (fork_wrapper_end).
template <typename Call>
pid_t forked(Call call) {
  fork_wrapper_begin();
  pid_t ptid = (pid_t)sys::gettid();  // the forking kernel thread (the child's copy of this frame)
  pid_t pid = call();
  if (pid == 0 && mn_active()) {
    fork_child_reset();
    rt_after_fork();
  } else if (pid == 0) {
    fork_child_reset_1to1();  // glibc's handler did it (fork), or not (_Fork)
  }
  // A kernel-thread owner raised by priority inheritance: the child has
  // its own scheduling (pi_after_fork kept the parent's table for this).
  if (pid == 0) pi_fork_child_self(ptid);
  fork_wrapper_end(pid == 0 && mn_active());
  return pid;
}
}  // namespace

GOSHIM_EXPORT pid_t fork(void) {
  return forked([] { return real::lazy::fork()(); });
}

GOSHIM_EXPORT pid_t _Fork(void) {
  return forked([] { return real::lazy::_Fork()(); });
}
