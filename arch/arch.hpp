// Architecture seam: the one header core/ includes for context switching
// and thread-pointer access. Each architecture provides the same names in
// arch/<arch>/arch.hpp and switch.S.
#pragma once

#if defined(__x86_64__)
#include "arch/x86_64/arch.hpp"
#else
#error "goshim: unsupported architecture (see arch/aarch64/README for the port's seam)"
#endif
