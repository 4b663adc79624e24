// Helpers for the fd-layer interposers (socket_io.cpp, fd.cpp, poll.cpp,
// sleep.cpp): core returns the kernel's convention, libc's is -1 + errno.
#pragma once

#include <errno.h>

#include "shim/shim.hpp"

extern "C" [[noreturn]] void __chk_fail(void);

// First statement of every fd-layer interposer: on a goroutine, honours a
// pending preemption and delivers pending signals, like every interposed
// call (shim::user_g); the core decides the rest (fd_user_g).
#define GOSHIM_IO_ENTRY() ((void)::goshim::shim::user_g())

namespace goshim::shim {

inline long set_errno(long r) {
  if (__builtin_expect(r < 0, 0)) {
    errno = (int)-r;
    return -1;
  }
  return r;
}

}  // namespace goshim::shim
