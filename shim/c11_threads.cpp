// C11 threads (<threads.h>) on goshim's pthreads.
//
// glibc 2.36 implements thrd_*, mtx_*, cnd_* and call_once with direct
// calls to its internal pthread functions, which never reach an
// interposer: a C11 thread was a kernel thread, and a goroutine blocked
// in mtx_lock or cnd_wait blocked its M. These wrappers do what glibc's
// do (sysdeps/pthread/thrd_*.c, mtx_*.c, cnd_*.c, call_once.c), on the
// interposed functions: a C11 thread is a goroutine, and its mutexes and
// condition variables park it. The objects have the pthread layouts
// (glibc asserts sizeof(mtx_t) == sizeof(pthread_mutex_t), likewise for
// cnd_t and once_flag), so a mutex is driven by one protocol only.
// tss_* live with the pthread keys (pthread_key.cpp), thrd_sleep with the
// sleeps (sleep.cpp).

// <threads.h> defines thrd_equal as a gnu_inline function when optimizing
// (__USE_EXTERN_INLINES); this file defines the exported one, which clang
// rejects as a redefinition. __NO_INLINE__ (what -O0 sets) turns glibc's
// header inlines off for this file only.
#ifndef __NO_INLINE__
#define __NO_INLINE__ 1
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

#include "shim/shim.hpp"

namespace {

// glibc's thrd_err_map.
int thrd_map(int err) {
  switch (err) {
    case 0:
      return thrd_success;
    case ENOMEM:
      return thrd_nomem;
    case ETIMEDOUT:
      return thrd_timedout;
    case EBUSY:
      return thrd_busy;
    default:
      return thrd_error;
  }
}

struct C11Start {
  thrd_start_t func;
  void* arg;
};

// A C11 start routine returns int; glibc's start_thread widens it through
// uintptr_t, and thrd_join narrows it back.
void* c11_start(void* p) {
  C11Start s = *(C11Start*)p;
  free(p);
  return (void*)(uintptr_t)s.func(s.arg);
}

}  // namespace

GOSHIM_EXPORT int thrd_create(thrd_t* thr, thrd_start_t func, void* arg) {
  C11Start* s = (C11Start*)malloc(sizeof *s);
  if (!s) return thrd_nomem;
  s->func = func;
  s->arg = arg;
  pthread_t t;
  int err = pthread_create(&t, nullptr, c11_start, s);
  if (err != 0) {
    free(s);
    return thrd_map(err);
  }
  *thr = (thrd_t)t;
  return thrd_success;
}

GOSHIM_EXPORT int thrd_join(thrd_t thr, int* res) {
  void* r = nullptr;
  int err = pthread_join((pthread_t)thr, &r);
  if (err == 0 && res) *res = (int)(uintptr_t)r;
  return thrd_map(err);
}

GOSHIM_EXPORT int thrd_detach(thrd_t thr) { return thrd_map(pthread_detach((pthread_t)thr)); }

GOSHIM_EXPORT thrd_t thrd_current(void) { return (thrd_t)pthread_self(); }

GOSHIM_EXPORT int thrd_equal(thrd_t a, thrd_t b) { return pthread_equal((pthread_t)a, (pthread_t)b); }

GOSHIM_EXPORT void thrd_yield(void) { sched_yield(); }

GOSHIM_EXPORT void thrd_exit(int res) { pthread_exit((void*)(uintptr_t)res); }

// glibc: mtx_plain and mtx_timed are the same (normal) mutex; either with
// mtx_recursive is recursive; any other type is a normal mutex.
GOSHIM_EXPORT int mtx_init(mtx_t* m, int type) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  bool recursive = type == (mtx_plain | mtx_recursive) || type == (mtx_timed | mtx_recursive);
  pthread_mutexattr_settype(&attr, recursive ? PTHREAD_MUTEX_RECURSIVE : PTHREAD_MUTEX_NORMAL);
  int err = pthread_mutex_init((pthread_mutex_t*)m, &attr);
  pthread_mutexattr_destroy(&attr);
  return thrd_map(err);
}

GOSHIM_EXPORT int mtx_lock(mtx_t* m) { return thrd_map(pthread_mutex_lock((pthread_mutex_t*)m)); }

// The unlocking calls honour a pending preemption here, with the program's
// return address (inside pthread_mutex_unlock it would be goshim's own).
GOSHIM_EXPORT int mtx_trylock(mtx_t* m) {
  int r = thrd_map(pthread_mutex_trylock((pthread_mutex_t*)m));
  if (r == thrd_busy) goshim::shim::preempt_check();
  return r;
}

GOSHIM_EXPORT int mtx_timedlock(mtx_t* __restrict m, const struct timespec* __restrict ts) {
  return thrd_map(pthread_mutex_timedlock((pthread_mutex_t*)m, ts));
}

GOSHIM_EXPORT int mtx_unlock(mtx_t* m) {
  int r = thrd_map(pthread_mutex_unlock((pthread_mutex_t*)m));
  goshim::shim::preempt_check();
  return r;
}

GOSHIM_EXPORT void mtx_destroy(mtx_t* m) { pthread_mutex_destroy((pthread_mutex_t*)m); }

GOSHIM_EXPORT int cnd_init(cnd_t* c) { return thrd_map(pthread_cond_init((pthread_cond_t*)c, nullptr)); }

GOSHIM_EXPORT int cnd_signal(cnd_t* c) {
  int r = thrd_map(pthread_cond_signal((pthread_cond_t*)c));
  goshim::shim::preempt_check();
  return r;
}

GOSHIM_EXPORT int cnd_broadcast(cnd_t* c) {
  int r = thrd_map(pthread_cond_broadcast((pthread_cond_t*)c));
  goshim::shim::preempt_check();
  return r;
}

GOSHIM_EXPORT int cnd_wait(cnd_t* c, mtx_t* m) {
  return thrd_map(pthread_cond_wait((pthread_cond_t*)c, (pthread_mutex_t*)m));
}

GOSHIM_EXPORT int cnd_timedwait(cnd_t* __restrict c, mtx_t* __restrict m,
                                const struct timespec* __restrict ts) {
  return thrd_map(pthread_cond_timedwait((pthread_cond_t*)c, (pthread_mutex_t*)m, ts));
}

GOSHIM_EXPORT void cnd_destroy(cnd_t* c) { pthread_cond_destroy((pthread_cond_t*)c); }

GOSHIM_EXPORT void call_once(once_flag* flag, void (*func)(void)) {
  pthread_once((pthread_once_t*)flag, func);
}
