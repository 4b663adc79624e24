// The GLRO(dl_open) hook (core/dlhook.cpp): initial-exec TLS of modules
// loaded by any dlopen, libc's own included, copied into goroutines' blocks.
#pragma once

namespace goshim {

// Replaces ld.so's GLRO(dl_open) with goshim's. False (nothing changed,
// why set) if the pointer is not found as expected. Once, at start-up.
bool install_dl_open_hook(const char** why);
// Whether the hook is in place (every dlopen then comes back through it).
bool dl_open_hooked();
// The bookkeeping after a dlopen (M:N only): the new modules' static TLS
// into every goroutine's block, the code ranges preemption avoids. Any
// thread; no runtime lock held.
void dl_after_load(void*);

}  // namespace goshim
