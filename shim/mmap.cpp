// mmap, mmap64, mremap, shmat: passed to the kernel; core/memclass hears
// when a mapping that may be shared with another process appears, so that
// its cached answers for futex words (syscall(SYS_futex) without
// FUTEX_PRIVATE_FLAG) are never stale-private. Signal-safe, usable before
// init (no libc, no locks).
#include <errno.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>

#include "core/memclass.hpp"
#include "shim/shim.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {
inline bool failed(long r) { return r < 0 && r > -4096; }
}  // namespace

GOSHIM_EXPORT void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  long r = sys::raw6(SYS_mmap, (long)addr, (long)len, prot, flags, fd, (long)off);
  if (failed(r)) {
    errno = (int)-r;
    return MAP_FAILED;
  }
  if ((flags & MAP_TYPE) != MAP_PRIVATE) memclass_mapping_changed();
  return (void*)r;
}

GOSHIM_EXPORT void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off)
    __attribute__((alias("mmap")));

GOSHIM_EXPORT void* mremap(void* old, size_t old_len, size_t new_len, int flags, ...) {
  void* new_addr = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void*);
    va_end(ap);
  }
  long r = sys::raw5(SYS_mremap, (long)old, (long)old_len, (long)new_len, flags, (long)new_addr);
  if (failed(r)) {
    errno = (int)-r;
    return MAP_FAILED;
  }
  memclass_mapping_changed();  // the moved mapping may be a shared one
  return (void*)r;
}

GOSHIM_EXPORT void* shmat(int shmid, const void* addr, int flags) {
  long r = sys::raw3(SYS_shmat, shmid, (long)addr, flags);
  if (failed(r)) {
    errno = (int)-r;
    return (void*)-1;
  }
  memclass_mapping_changed();
  return (void*)r;
}
