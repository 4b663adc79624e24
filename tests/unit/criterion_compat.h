// Criterion before 2.4 (2.3.3 in Debian 11) declares its C++ allocator with
// std::allocator<void>::const_pointer, which C++20 removed, so
// <criterion/criterion.h> does not compile with -std=c++20. The Makefile
// force-includes this file for the unit tests when pkg-config reports an
// older Criterion: it takes the place of <criterion/alloc.h> (same include
// guard) with the same C functions and a C++20 allocator.
#ifndef CRITERION_ALLOC_H_
#define CRITERION_ALLOC_H_

#include <cstddef>

extern "C" {
void* cr_malloc(size_t size);
void* cr_calloc(size_t nmemb, size_t size);
void* cr_realloc(void* ptr, size_t size);
void cr_free(void* ptr);
}

namespace criterion {
template <typename T>
struct allocator {
  using value_type = T;
  allocator() = default;
  template <typename U>
  allocator(const allocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(cr_malloc(n * sizeof(T))); }
  void deallocate(T* p, size_t) { cr_free(p); }
  template <typename U>
  bool operator==(const allocator<U>&) const { return true; }
};
}  // namespace criterion

#endif
