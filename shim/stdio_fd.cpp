// dprintf and vdprintf write inside libc (glibc's internal write, which no
// interposer sees), like stdio on an fdopen'ed file: the fd gets its
// blocking mode back first, or a full pipe or socket would make them fail
// with EAGAIN (see fdopen in shim/fd.cpp).
#include <stdarg.h>
#include <dlfcn.h>
#include <stdio.h>

#include "core/fdops.hpp"
#include "shim/io.hpp"
#include "shim/shim.hpp"

using namespace goshim;

namespace {
using vdprintf_fn = int (*)(int, const char*, va_list);
vdprintf_fn real_vdprintf;
}  // namespace

GOSHIM_EXPORT int vdprintf(int fd, const char* fmt, va_list ap) {
  GOSHIM_IO_ENTRY();
  fdop_before_fdopen(fd);
  if (!real_vdprintf) real_vdprintf = (vdprintf_fn)dlsym(RTLD_NEXT, "vdprintf");
  return real_vdprintf(fd, fmt, ap);
}

GOSHIM_EXPORT int dprintf(int fd, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = vdprintf(fd, fmt, ap);
  va_end(ap);
  return r;
}

// The _FORTIFY_SOURCE variants.
extern "C" int __vdprintf_chk(int fd, int flag, const char* fmt, va_list ap);
namespace {
using vdprintf_chk_fn = int (*)(int, int, const char*, va_list);
vdprintf_chk_fn real_vdprintf_chk;
}  // namespace

GOSHIM_EXPORT int __vdprintf_chk(int fd, int flag, const char* fmt, va_list ap) {
  GOSHIM_IO_ENTRY();
  fdop_before_fdopen(fd);
  if (!real_vdprintf_chk) real_vdprintf_chk = (vdprintf_chk_fn)dlsym(RTLD_NEXT, "__vdprintf_chk");
  return real_vdprintf_chk(fd, flag, fmt, ap);
}

GOSHIM_EXPORT int __dprintf_chk(int fd, int flag, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = __vdprintf_chk(fd, flag, fmt, ap);
  va_end(ap);
  return r;
}
