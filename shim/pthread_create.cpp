// Thread lifecycle: pthread_create, join (plain, try, timed, clock),
// detach, exit, self, equal.
// <pthread.h> defines pthread_equal as a gnu_inline function when
// optimizing (__USE_EXTERN_INLINES); this file defines the exported one,
// which clang rejects as a redefinition. __NO_INLINE__ (what -O0 sets)
// turns glibc's header inlines off for this file only.
#ifndef __NO_INLINE__
#define __NO_INLINE__ 1
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "arch/arch.hpp"
#include "core/tcb.hpp"
#include "core/config.hpp"
#include "core/debug.hpp"
#include "core/proc.hpp"
#include "core/sema.hpp"
#include "core/tls.hpp"
#include "shim/attr.hpp"
#include "shim/shim.hpp"
#include "syscalls/blocking.hpp"

using namespace goshim;

namespace {

// Whether t names a goroutine slot (live or not): such a t is never passed
// to glibc, which would take its virtual tid to the kernel.
bool goshim_owned(pthread_t t) {
  return mn_active() && is_goshim_tp(t);
}

bool valid_timespec(const struct timespec* ts) {
  return ts && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000;
}

int join_common(pthread_t t, void** ret, int64_t deadline) {
  G* target = g_from_pthread(t);
  if (!target) return gone_thread_error(t);
  return thread_join(target, ret, deadline);
}

}  // namespace

GOSHIM_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr,
                                 void* (*start)(void*), void* arg) {
  if (!mn_active()) {
    shim::ensure_real();
    int r = real::pthread_create(thread, attr, start, arg);
    if (r == 0 && config.stats) stats_thread_created();
    return r;
  }
  shim::user_g();  // a pending preemption or signal first, as at any call
  CreateAttr a;
  int err = attr::to_create_attr(attr, &a);
  if (err) return err;
  return thread_create(a, start, arg, thread);
}

// A goroutine joining a kernel thread (one created before goshim started,
// e.g. by a constructor) makes glibc's join, a cancellation point, in a
// blocking section that its cancellation unwinds through and leaves
// (blocking_cancellable; with a plain BlockingCall the G was left without
// a P, and pthread_cancel never interrupted the wait).
GOSHIM_EXPORT int pthread_join(pthread_t t, void** ret) {
  if (!goshim_owned(t)) {
    shim::ensure_real();
    if (shim::user_g()) {  // a goroutine joining a kernel thread: a blocking call
      return blocking_cancellable(BlockKind::Long, "pthread_join",
                                  [&] { return real::pthread_join(t, ret); });
    }
    return real::pthread_join(t, ret);
  }
  return join_common(t, ret, 0);
}

GOSHIM_EXPORT int pthread_tryjoin_np(pthread_t t, void** ret) {
  if (!goshim_owned(t)) {
    shim::ensure_real();
    return real::pthread_tryjoin_np(t, ret);
  }
  // glibc answers EBUSY whenever the descriptor's tid is not 0: the
  // thread runs (the caller itself included) or was joined (tid -1).
  G* target = g_from_pthread(t);
  if (!target) return gone_thread_error(t) == EINVAL ? EINVAL : EBUSY;
  if (!thread_exited(target)) return EBUSY;
  return thread_join(target, ret, -1);
}

GOSHIM_EXPORT int pthread_timedjoin_np(pthread_t t, void** ret, const struct timespec* abstime) {
  if (!goshim_owned(t)) {
    shim::ensure_real();
    if (shim::user_g()) {
      return blocking_cancellable(BlockKind::Long, "pthread_timedjoin_np",
                                  [&] { return real::pthread_timedjoin_np(t, ret, abstime); });
    }
    return real::pthread_timedjoin_np(t, ret, abstime);
  }
  if (!abstime) return join_common(t, ret, 0);  // glibc: NULL waits forever
  if (!valid_timespec(abstime)) return EINVAL;
  if (abstime->tv_sec < 0) return ETIMEDOUT;
  return join_common(t, ret, deadline_from_abs(CLOCK_REALTIME, abstime));
}

GOSHIM_EXPORT int pthread_clockjoin_np(pthread_t t, void** ret, clockid_t clk,
                                       const struct timespec* abstime) {
  if (!goshim_owned(t)) {
    shim::ensure_real();
    if (shim::user_g()) {
      return blocking_cancellable(BlockKind::Long, "pthread_clockjoin_np",
                                  [&] { return real::pthread_clockjoin_np(t, ret, clk, abstime); });
    }
    return real::pthread_clockjoin_np(t, ret, clk, abstime);
  }
  if (!abstime) return join_common(t, ret, 0);
  if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC) return EINVAL;
  if (!valid_timespec(abstime)) return EINVAL;
  if (abstime->tv_sec < 0) return ETIMEDOUT;
  return join_common(t, ret, deadline_from_abs(clk, abstime));
}

GOSHIM_EXPORT int pthread_detach(pthread_t t) {
  if (!goshim_owned(t)) {
    shim::ensure_real();
    return real::pthread_detach(t);
  }
  G* target = g_from_pthread(t);
  if (!target) return gone_thread_error(t);
  return thread_detach(target);
}

GOSHIM_EXPORT void pthread_exit(void* value) {
  shim::ensure_real();
  G* g = tls_g;
  if (g && !g->is_g0()) {
    g->retval = value;
    g->exit_called = true;
  }
  // glibc unwinds the stack (cleanup handlers, C++ destructors) and lands
  // in the G's entry frame, which ends the G (thread_exit_landed).
  real::pthread_exit(value);
  __builtin_unreachable();
}

GOSHIM_EXPORT pthread_t pthread_self(void) {
#if defined(__x86_64__)
  pthread_t self;
  __asm__("movq %%fs:0x10, %0" : "=r"(self));  // THREAD_SELF: header.self
  return self;
#else
  return (pthread_t)tcb::self();  // THREAD_SELF: tp - sizeof(struct pthread)
#endif
}

GOSHIM_EXPORT int pthread_equal(pthread_t a, pthread_t b) { return a == b; }
