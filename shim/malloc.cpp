// The process allocator is jemalloc, linked into libgoshim.so (DESIGN.md,
// "Dependencies"). malloc, free, calloc and realloc go through the current
// M's jemalloc cache on a goroutine (core/mcache.hpp): jemalloc's own
// functions of those names are renamed goshim_je_* at build time
// (core/jemalloc_glue.syms). glibc only lets a replacement allocator work
// if every allocation entry point is replaced; jemalloc has no pvalloc, so
// it is provided here (glibc's would allocate from glibc's own heap).
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "core/mcache.hpp"

#define GOSHIM_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" {
void* memalign(size_t alignment, size_t size);
void* goshim_je_malloc(size_t size);
void goshim_je_free(void* p);
void* goshim_je_calloc(size_t n, size_t size);
void* goshim_je_realloc(void* p, size_t size);
void* mallocx(size_t size, int flags);
void* rallocx(void* p, size_t size, int flags);
void dallocx(void* p, int flags);
}

using goshim::AllocCtx;
using goshim::alloc_enter;
using goshim::alloc_leave;

GOSHIM_EXPORT void* malloc(size_t size) {
  if (size == 0) return goshim_je_malloc(0);  // mallocx needs a size
  AllocCtx c = alloc_enter();
  if (c.flags == 0) {
    alloc_leave(c);
    return goshim_je_malloc(size);
  }
  void* p = mallocx(size, c.flags);
  alloc_leave(c);
  if (__builtin_expect(p == nullptr, 0)) errno = ENOMEM;
  return p;
}

GOSHIM_EXPORT void free(void* p) {
  if (p == nullptr) return;
  AllocCtx c = alloc_enter(/*for_free=*/true);
  if (c.flags == 0)
    goshim_je_free(p);
  else
    dallocx(p, c.flags);
  alloc_leave(c);
}

GOSHIM_EXPORT void* calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  if (total == 0) return goshim_je_calloc(n, size);
  AllocCtx c = alloc_enter();
  if (c.flags == 0) {
    alloc_leave(c);
    return goshim_je_calloc(n, size);
  }
  void* p = mallocx(total, c.flags | goshim::kMallocxZero);
  alloc_leave(c);
  if (__builtin_expect(p == nullptr, 0)) errno = ENOMEM;
  return p;
}

GOSHIM_EXPORT void* realloc(void* p, size_t size) {
  if (p == nullptr) return malloc(size);
  if (size == 0) return goshim_je_realloc(p, 0);  // realloc(p, 0): jemalloc's own rule
  AllocCtx c = alloc_enter();
  if (c.flags == 0) {
    alloc_leave(c);
    return goshim_je_realloc(p, size);
  }
  void* q = rallocx(p, size, c.flags);
  alloc_leave(c);
  if (__builtin_expect(q == nullptr, 0)) errno = ENOMEM;
  return q;
}

GOSHIM_EXPORT void* pvalloc(size_t size) {
  size_t page = (size_t)getpagesize();
  if (size == 0) size = page;
  if (size + page - 1 < size) return nullptr;
  return memalign(page, (size + page - 1) & ~(page - 1));
}
