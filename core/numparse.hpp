// The one parser of the integer settings: GOSHIM_MAXPROCS and the
// millisecond values of GOSHIM_DEBUG (core/config.cpp) and the launcher's
// --procs and --schedtrace (launcher/goshim.cpp) accept and refuse exactly
// the same strings, in the same ranges. As core/size.hpp: header-only (the
// launcher links no core object), any thread, no malloc.
#pragma once

#include <errno.h>
#include <stdlib.h>

namespace goshim {

// The most Ps (GOSHIM_MAXPROCS, --procs): 1..kMaxProcs.
inline constexpr int kMaxProcs = 1024;
// The longest period of a GOSHIM_DEBUG millisecond setting (schedtrace,
// pinned, quiesce; --schedtrace): one hour.
inline constexpr long kMaxDebugMs = 3600000;

// Parses a decimal integer in lo..hi: digits only (no sign, no space, no
// suffix), as parse_size. Returns false on a bad value and leaves *out.
inline bool parse_int(const char* s, long lo, long hi, long* out) {
  if (!s || *s < '0' || *s > '9') return false;
  for (const char* p = s; *p; p++)
    if (*p < '0' || *p > '9') return false;
  int saved = errno;
  errno = 0;
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  bool range = errno == ERANGE;
  errno = saved;
  if (range || *end != 0 || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// GOSHIM_MAXPROCS and --procs.
inline bool parse_procs(const char* s, int* out) {
  long v;
  if (!parse_int(s, 1, kMaxProcs, &v)) return false;
  *out = (int)v;
  return true;
}

// GOSHIM_DEBUG=schedtrace=MS and --schedtrace MS.
inline bool parse_schedtrace_ms(const char* s, int* out) {
  long v;
  if (!parse_int(s, 1, kMaxDebugMs, &v)) return false;
  *out = (int)v;
  return true;
}

}  // namespace goshim
