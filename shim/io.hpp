// Helpers for the fd-layer interposers (socket_io.cpp, fd.cpp, poll.cpp,
// sleep.cpp): core returns the kernel's convention, libc's is -1 + errno.
#pragma once

#include <errno.h>

#include "shim/shim.hpp"

extern "C" [[noreturn]] void __chk_fail(void);

namespace goshim::shim {

inline long set_errno(long r) {
  if (__builtin_expect(r < 0, 0)) {
    errno = (int)-r;
    return -1;
  }
  return r;
}

}  // namespace goshim::shim
