// Architecture seam: the one header core/ includes for context switching
// and thread-pointer access. Each architecture provides the same names in
// arch/<arch>/arch.hpp and switch.S.
#pragma once

#if defined(__x86_64__)
#include "arch/x86_64/arch.hpp"
#elif defined(__aarch64__)
#include "arch/aarch64/arch.hpp"
#else
#error "goshim: unsupported architecture (x86_64 and aarch64 only)"
#endif
