// The process allocator is jemalloc, linked into libgoshim.so (DESIGN.md,
// "Dependencies"): its per-thread caches hang off pthread keys, which goshim
// runs at goroutine exit. glibc only lets a replacement allocator work if
// every allocation entry point is replaced; jemalloc has no pvalloc, so it
// is provided here (glibc's would allocate from glibc's own heap).
#include <stddef.h>
#include <unistd.h>

#define GOSHIM_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" void* memalign(size_t alignment, size_t size);

GOSHIM_EXPORT void* pvalloc(size_t size) {
  size_t page = (size_t)getpagesize();
  if (size == 0) size = page;
  if (size + page - 1 < size) return nullptr;
  return memalign(page, (size + page - 1) & ~(page - 1));
}
