// Logging that never allocates, never locks and never touches errno.
//
// Signal-safe. Usable on g0, without a P and before init. Output goes to
// stderr with one write(2) per message (so lines from different Ms do not
// interleave mid-line, up to the 512-byte buffer).
//
// Formats: %s %d %ld %u %lu %x %lx %p %c %%, with an optional field width
// (%5d, %-8s) — enough for the runtime's own messages and dumps.
#pragma once

#include <stdarg.h>
#include <stddef.h>

namespace goshim {

// Writes one formatted message to fd 2.
void rawlog(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Same, to any fd.
void rawlog_fd(int fd, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Formats into buf (always NUL-terminated); returns the length written.
size_t rawfmt(char* buf, size_t size, const char* fmt, va_list ap);
size_t rawfmt(char* buf, size_t size, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// "goshim: fatal error: <msg>" and abort the process. msg must be a string
// constant ("to avoid allocating in perilous situations").
[[noreturn]] void fatal(const char* msg);
// Same with a formatted detail line.
[[noreturn]] void fatalf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace goshim

// Invariant checks. GOSHIM_CHECK is always on (cheap checks that protect
// against memory corruption); GOSHIM_DCHECK only in debug builds.
#define GOSHIM_CHECK(cond, msg)                          \
  do {                                                   \
    if (__builtin_expect(!(cond), 0)) ::goshim::fatal(msg); \
  } while (0)

#ifdef GOSHIM_DEBUG_BUILD
#define GOSHIM_DCHECK(cond, msg) GOSHIM_CHECK(cond, msg)
#else
#define GOSHIM_DCHECK(cond, msg) \
  do {                           \
  } while (0)
#endif
