// The one parser of sizes ("123", "64k", "8m", "1g", an optional trailing
// "b"): GOSHIM_STACK (core/config.cpp) and the launcher's --stack
// (launcher/goshim.cpp) accept and refuse exactly the same strings.
// Header-only: the launcher links no core object. Any thread, no malloc.
#pragma once

#include <stddef.h>
#include <stdlib.h>

namespace goshim {

// The smallest goroutine stack a user may ask for.
constexpr size_t kMinStackSize = 16384;

// Parses a positive size of at most 1 TiB. Returns false on a bad value.
inline bool parse_size(const char* s, size_t* out) {
  if (!s || *s < '0' || *s > '9') return false;  // no sign, no space
  char* end = nullptr;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return false;
  unsigned long long mul = 1;
  if (*end == 'k' || *end == 'K') mul = 1024, end++;
  else if (*end == 'm' || *end == 'M') mul = 1024 * 1024, end++;
  else if (*end == 'g' || *end == 'G') mul = 1024ull * 1024 * 1024, end++;
  if (*end == 'b' || *end == 'B') end++;
  if (*end != 0 || v == 0 || v > (1ull << 40) / mul) return false;
  *out = (size_t)(v * mul);
  return true;
}

// A stack size: parse_size and at least kMinStackSize.
inline bool parse_stack_size(const char* s, size_t* out) {
  size_t v;
  if (!parse_size(s, &v) || v < kMinStackSize) return false;
  *out = v;
  return true;
}

}  // namespace goshim
