// syscall(): the entry is arch/<arch>/syscall.S, which passes every number
// to the kernel except SYS_futex (served by core/futex, in-process) and the
// calls that may create shared mappings (which core/memclass must hear of).
// These are the C halves, with syscall()'s convention: the result, or -1
// with errno set.
#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "core/futex.hpp"
#include "core/memclass.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {
inline long result(long r) {
  if (r < 0 && r > -4096) {
    errno = (int)-r;
    return -1;
  }
  return r;
}
}  // namespace

extern "C" __attribute__((visibility("hidden"))) long goshim_syscall_futex(long, long a1, long a2,
                                                                          long a3, long a4,
                                                                          long a5, long a6) {
  return result(futex_syscall((uint32_t*)a1, (int)a2, (uint32_t)a3, (const struct timespec*)a4,
                              (uint32_t*)a5, (uint32_t)a6));
}

extern "C" __attribute__((visibility("hidden"))) long goshim_syscall_mapping(long nr, long a1,
                                                                            long a2, long a3,
                                                                            long a4, long a5,
                                                                            long a6) {
  long r = sys::raw6(nr, a1, a2, a3, a4, a5, a6);
  // mmap: a3 is the flags. mremap may move a shared mapping; shmat maps one.
  if (r >= 0 || r <= -4096)
    if (nr != SYS_mmap || (a3 & MAP_TYPE) != MAP_PRIVATE) memclass_mapping_changed();
  return result(r);
}
