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
#include "core/preempt.hpp"
#include "core/real.hpp"
#include "core/runtime.hpp"
#include "core/signal.hpp"

#define GOSHIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace goshim::shim {

// The current goroutine when goshim should serve this call, else nullptr:
// nullptr before init, in 1:1 mode, on foreign threads and g0, inside a
// program signal handler, and inside a blocking call (a handler interrupted
// it). A pending preemption is honoured here when the call comes from the
// program's own code (always inlined into the interposer, so the return
// address is the interposer's caller).
__attribute__((always_inline)) inline G* user_g() {
  G* g = tls_g;
  if (__builtin_expect(g == nullptr || !g->serves_calls(), 0)) return nullptr;
  if (__builtin_expect(g->preempt.load(std::memory_order_relaxed), 0))
    preempt_at_call(g, __builtin_return_address(0));
  if (__builtin_expect(g->sigpending.load(std::memory_order_relaxed) & ~g->sigmask, 0))
    signal_deliver(g);
  return g;
}

__attribute__((noinline, cold)) inline void preempt_check_slow(G* g, const void* caller_pc) {
  if (g->serves_calls()) preempt_at_call(g, caller_pc);
}

// A pending preemption, honoured at the end of a call whose fast path
// needs no user_g (unlocking, signalling a condition variable, a failed
// trylock): a program that spends its time slice in such calls, where the
// preemption signal never finds it in its own code, yields as it would at
// any other call. Always inlined into the interposer, for the same return
// address as user_g.
__attribute__((always_inline)) inline void preempt_check() {
  G* g = tls_g;
  if (__builtin_expect(g != nullptr && g->preempt.load(std::memory_order_relaxed), 0))
    preempt_check_slow(g, __builtin_return_address(0));
}

// Makes sure real:: pointers are usable (for pass-through before init).
inline void ensure_real() {
  if (__builtin_expect(real::pthread_create == nullptr, 0)) real::resolve();
}

}  // namespace goshim::shim
