// dlopen/dlmopen: a module with initial-exec TLS loaded after goroutines
// exist gets its TLS image copied into every goroutine's block (glibc only
// initializes the blocks of the kernel threads it knows about).
#include <dlfcn.h>

#include "core/preempt.hpp"
#include "core/tls.hpp"
#include "shim/shim.hpp"

using namespace goshim;

GOSHIM_EXPORT void* dlopen(const char* file, int mode) {
  shim::ensure_real();
  void* h = real::dlopen(file, mode);
  if (h && mn_active()) {
    tls::after_dlopen();
    preempt_refresh_ranges();
  }
  return h;
}

GOSHIM_EXPORT void* dlmopen(Lmid_t lmid, const char* file, int mode) {
  shim::ensure_real();
  void* h = real::dlmopen(lmid, file, mode);
  if (h && mn_active()) {
    tls::after_dlopen();
    preempt_refresh_ranges();
  }
  return h;
}
