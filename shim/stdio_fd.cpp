// dprintf and vdprintf write inside libc (glibc's internal write, which no
// interposer sees), like stdio on an fdopen'ed file: the fd gets its
// blocking mode back first, or a full pipe or socket would make them fail
// with EAGAIN (see fdopen in shim/fd.cpp).
#include <stdarg.h>
#include <stdio.h>

#include "core/fdops.hpp"
#include "core/real.hpp"
#include "shim/io.hpp"
#include "shim/shim.hpp"

using namespace goshim;

GOSHIM_EXPORT int vdprintf(int fd, const char* fmt, va_list ap) {
  GOSHIM_IO_ENTRY();
  fdop_before_fdopen(fd);
  return real::lazy::vdprintf()(fd, fmt, ap);
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

GOSHIM_EXPORT int __vdprintf_chk(int fd, int flag, const char* fmt, va_list ap) {
  GOSHIM_IO_ENTRY();
  fdop_before_fdopen(fd);
  return real::lazy::__vdprintf_chk()(fd, flag, fmt, ap);
}

GOSHIM_EXPORT int __dprintf_chk(int fd, int flag, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = __vdprintf_chk(fd, flag, fmt, ap);
  va_end(ap);
  return r;
}
