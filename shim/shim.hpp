// Common helpers for the interposed symbols.
//
// Every shim function does three things (STYLE.md, "Thin interposition"):
//   1. decides whether goshim serves the call: only on a user G once the
//      runtime is up (user_g() != nullptr);
//   2. otherwise calls the real libc function (before init, on g0, on a
//      foreign kernel thread, in 1:1 mode);
//   3. else translates the call into one core operation.
// Shim files hold no scheduler state.
#pragma once

#include "core/gmp.hpp"
#include "core/real.hpp"
#include "core/runtime.hpp"

#define GOSHIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace goshim::shim {

// The current goroutine when goshim should serve this call, else nullptr.
inline G* user_g() {
  G* g = tls_g;  // nullptr before init, in 1:1 mode and on foreign threads
  if (__builtin_expect(g == nullptr, 0)) return nullptr;
  if (__builtin_expect(g->flags & kGFlagG0, 0)) return nullptr;
  // Inside a blocking call (a signal handler interrupted it): no P.
  if (__builtin_expect(g->status.load(std::memory_order_relaxed) != GStatus::Running, 0))
    return nullptr;
  return g;
}

// Makes sure real:: pointers are usable (for pass-through before init).
inline void ensure_real() {
  if (__builtin_expect(real::pthread_create == nullptr, 0)) real::resolve();
}

}  // namespace goshim::shim
