// pthread_attr_*: glibc 2.36's semantics on glibc's layout, with goshim's
// defaults (GOSHIM_STACK changes what a default-size thread gets, and the
// getters report it), plus pthread_getattr_np for goroutines and the
// process-wide defaults (pthread_{get,set}attr_default_np).
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <new>

#include "core/contract.hpp"
#include "core/proc.hpp"
#include "core/real.hpp"

// glibc 2.32 added the signal-mask attribute; goshim exports it whatever the
// headers it is built with (Debian 11 has glibc 2.31).
#ifndef PTHREAD_ATTR_NO_SIGMASK_NP
#define PTHREAD_ATTR_NO_SIGMASK_NP (-1)
extern "C" int pthread_attr_setsigmask_np(pthread_attr_t*, const sigset_t*);
extern "C" int pthread_attr_getsigmask_np(const pthread_attr_t*, sigset_t*);
#endif
#include "core/stack.hpp"
#include "shim/attr.hpp"
#include "shim/shim.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;
using namespace goshim::attr;

namespace {

// goshim's default attribute in M:N mode (glibc's own otherwise).
Mutex default_lock{LockRank::AttrDefault};
pthread_attr_t default_attr;
bool default_ready = false;
// False until pthread_setattr_default_np: pthread_create(NULL attr) then
// needs no lock (the common case).
std::atomic<bool> default_custom{false};

int check_policy(int pol) {
  return (pol == SCHED_OTHER || pol == SCHED_FIFO || pol == SCHED_RR) ? 0 : EINVAL;
}

int check_priority(int pr, int pol) {
  int min = sched_get_priority_min(pol);
  int max = sched_get_priority_max(pol);
  return (min >= 0 && max >= 0 && pr >= min && pr <= max) ? 0 : EINVAL;
}

int check_stacksize(size_t st) { return st >= (size_t)PTHREAD_STACK_MIN ? 0 : EINVAL; }

// glibc before 2.32 keeps an attribute's CPU set inline (cpuset,
// cpusetsize) where later releases point to an extension, and has no
// signal-mask attribute (it came with the extension). goshim runs 1:1
// there: the functions that touch that part are glibc's own.
bool inline_cpuset() {
  static std::atomic<int> known{-1};
  int v = known.load(std::memory_order_relaxed);
  if (__builtin_expect(v < 0, 0)) {
    v = real::lazy::pthread_attr_setsigmask_np() == nullptr;
    known.store(v, std::memory_order_relaxed);
  }
  return v;
}

int ensure_extension(Attr* a) {
  if (a->extension) return 0;
  a->extension = (Extension*)real::lazy::calloc()(1, sizeof(Extension));
  return a->extension ? 0 : ENOMEM;
}

// glibc's __pthread_attr_copy: a deep copy of the extension.
int attr_copy(pthread_attr_t* target, const pthread_attr_t* source) {
  pthread_attr_t temp = *source;
  Attr* t = in(&temp);
  const Attr* s = in(source);
  t->extension = nullptr;
  int ret = 0;
  if (s->extension) {
    if (s->extension->cpuset && s->extension->cpusetsize)
      ret = pthread_attr_setaffinity_np(&temp, s->extension->cpusetsize, s->extension->cpuset);
    if (ret == 0 && s->extension->sigmask_set)
      ret = pthread_attr_setsigmask_np(&temp, &s->extension->sigmask);
  }
  if (ret != 0) {
    pthread_attr_destroy(&temp);
    return ret;
  }
  *target = temp;
  return 0;
}

// Locks held: default_lock.
void init_default_locked() {
  GOSHIM_LOCK_HELD(&default_lock, "default_lock");
  if (default_ready) return;
  auto f = real::lazy::pthread_getattr_default_np();
  if (!f || f(&default_attr) != 0) {
    memset(&default_attr, 0, sizeof default_attr);
    in(&default_attr)->guardsize = (size_t)getpagesize();
  }
  default_ready = true;
}

size_t default_stacksize() {
  if (mn_active()) return default_stack_size();
  MutexGuard g(default_lock);
  init_default_locked();
  return in(&default_attr)->stacksize;
}

// The goroutine whose scheduling a new thread inherits: the caller, M:N
// or bound to its M by a real-time policy (core/rtlock.hpp).
G* sched_creator() {
  G* g = tls_g;
  if (g && !g->is_g0() && g->rt_locked) return g;
  return shim::user_g();
}

uint64_t sigset_bits(const sigset_t* s) {
  uint64_t v;
  memcpy(&v, s, sizeof v);
  return v;
}

}  // namespace

void goshim::attr::after_fork() { default_lock.reset(); }

int goshim::attr::to_create_attr(const pthread_attr_t* attr, CreateAttr* out) {
  pthread_attr_t dflt;
  if (!attr && !default_custom.load(std::memory_order_acquire)) {
    static const size_t page = (size_t)getpagesize();
    out->guard_size = page;
    out->guard_set = true;
    if (G* cur = sched_creator()) {
      out->sched_policy = cur->sched_policy;
      out->sched_priority = cur->sched_priority;
    }
    return 0;
  }
  if (!attr) {
    MutexGuard g(default_lock);
    init_default_locked();
    dflt = default_attr;  // shallow: the extension is read under no lock below
    attr = &dflt;
  }
  const Attr* a = in(attr);
  out->detached = a->flags & kDetachState;
  if (a->flags & kStackAddr) {
    size_t size = a->stacksize ? a->stacksize : default_stacksize();
    out->stack_lo = (uintptr_t)a->stackaddr - size;
    out->stack_size = size;
  } else {
    out->stack_size = a->stacksize;  // 0: the default
  }
  out->guard_size = a->guardsize;
  out->guard_set = true;
  if (out->stack_size && out->stack_size + out->guard_size < out->stack_size) return EINVAL;
  G* cur = sched_creator();
  if (a->flags & kNotInheritSched) {
    // A real-time policy is applied by the new G on its M before its start
    // routine runs; pthread_create returns the kernel's error (EPERM).
    out->sched_policy = (a->flags & kPolicySet) ? a->schedpolicy : SCHED_OTHER;
    out->sched_priority = (a->flags & kSchedSet) ? a->schedparam.sched_priority : 0;
  } else if (cur) {
    out->sched_policy = cur->sched_policy;
    out->sched_priority = cur->sched_priority;
  }
  if (a->extension && a->extension->sigmask_set) {
    out->has_sigmask = true;
    out->sigmask = sigset_bits(&a->extension->sigmask);
  }
  return 0;
}

// ---- the attribute object -----------------------------------------------------

GOSHIM_EXPORT int pthread_attr_init(pthread_attr_t* attr) {
  memset(attr, 0, sizeof *attr);
  in(attr)->guardsize = (size_t)getpagesize();
  return 0;
}

GOSHIM_EXPORT int pthread_attr_destroy(pthread_attr_t* attr) {
  if (inline_cpuset()) return real::lazy::pthread_attr_destroy()(attr);
  Attr* a = in(attr);
  if (!(a->flags & kOldAttr) && a->extension) {
    real::lazy::free()(a->extension->cpuset);
    real::lazy::free()(a->extension);
    a->extension = nullptr;
  }
  return 0;
}

GOSHIM_EXPORT int pthread_attr_getdetachstate(const pthread_attr_t* attr, int* state) {
  *state = (in(attr)->flags & kDetachState) ? PTHREAD_CREATE_DETACHED : PTHREAD_CREATE_JOINABLE;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_setdetachstate(pthread_attr_t* attr, int state) {
  if (state != PTHREAD_CREATE_DETACHED && state != PTHREAD_CREATE_JOINABLE) return EINVAL;
  if (state == PTHREAD_CREATE_DETACHED)
    in(attr)->flags |= kDetachState;
  else
    in(attr)->flags &= ~kDetachState;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_getguardsize(const pthread_attr_t* attr, size_t* size) {
  *size = in(attr)->guardsize;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_setguardsize(pthread_attr_t* attr, size_t size) {
  in(attr)->guardsize = size;  // not rounded: POSIX wants the value back
  return 0;
}

GOSHIM_EXPORT int pthread_attr_getinheritsched(const pthread_attr_t* attr, int* inherit) {
  *inherit = (in(attr)->flags & kNotInheritSched) ? PTHREAD_EXPLICIT_SCHED : PTHREAD_INHERIT_SCHED;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_setinheritsched(pthread_attr_t* attr, int inherit) {
  if (inherit != PTHREAD_INHERIT_SCHED && inherit != PTHREAD_EXPLICIT_SCHED) return EINVAL;
  if (inherit != PTHREAD_INHERIT_SCHED)
    in(attr)->flags |= kNotInheritSched;
  else
    in(attr)->flags &= ~kNotInheritSched;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_getschedparam(const pthread_attr_t* attr,
                                             struct sched_param* param) {
  *param = in(attr)->schedparam;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_setschedparam(pthread_attr_t* attr,
                                             const struct sched_param* param) {
  Attr* a = in(attr);
  int ret = check_priority(param->sched_priority, a->schedpolicy);
  if (ret) return ret;
  a->schedparam = *param;
  a->flags |= kSchedSet;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_getschedpolicy(const pthread_attr_t* attr, int* policy) {
  *policy = in(attr)->schedpolicy;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_setschedpolicy(pthread_attr_t* attr, int policy) {
  int ret = check_policy(policy);
  if (ret) return ret;
  in(attr)->schedpolicy = policy;
  in(attr)->flags |= kPolicySet;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_getscope(const pthread_attr_t* attr, int* scope) {
  *scope = (in(attr)->flags & kScopeProcess) ? PTHREAD_SCOPE_PROCESS : PTHREAD_SCOPE_SYSTEM;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_setscope(pthread_attr_t* attr, int scope) {
  switch (scope) {
    case PTHREAD_SCOPE_SYSTEM:
      in(attr)->flags &= ~kScopeProcess;
      return 0;
    case PTHREAD_SCOPE_PROCESS:
      return ENOTSUP;
    default:
      return EINVAL;
  }
}

GOSHIM_EXPORT int pthread_attr_getstack(const pthread_attr_t* attr, void** addr, size_t* size) {
  const Attr* a = in(attr);
  *addr = (char*)a->stackaddr - a->stacksize;
  *size = a->stacksize;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_setstack(pthread_attr_t* attr, void* addr, size_t size) {
  int ret = check_stacksize(size);
  if (ret) return ret;
  Attr* a = in(attr);
  a->stacksize = size;
  a->stackaddr = (char*)addr + size;
  a->flags |= kStackAddr;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_getstackaddr(const pthread_attr_t* attr, void** addr) {
  *addr = in(attr)->stackaddr;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_setstackaddr(pthread_attr_t* attr, void* addr) {
  in(attr)->stackaddr = addr;
  in(attr)->flags |= kStackAddr;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_getstacksize(const pthread_attr_t* attr, size_t* size) {
  size_t s = in(attr)->stacksize;
  *size = s ? s : default_stacksize();
  return 0;
}

GOSHIM_EXPORT int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  int ret = check_stacksize(size);
  if (ret) return ret;
  in(attr)->stacksize = size;
  return 0;
}

GOSHIM_EXPORT int pthread_attr_setaffinity_np(pthread_attr_t* attr, size_t size,
                                              const cpu_set_t* set) {
  if (inline_cpuset()) return real::lazy::pthread_attr_setaffinity_np()(attr, size, set);
  Attr* a = in(attr);
  // Declared nonnull, but glibc accepts NULL (it clears the set): hide the
  // pointer from the optimizer so the test is neither warned about nor
  // dropped.
  const cpu_set_t* volatile setp = set;
  if (setp == nullptr || size == 0) {
    if (a->extension) {
      real::lazy::free()(a->extension->cpuset);
      a->extension->cpuset = nullptr;
      a->extension->cpusetsize = 0;
    }
    return 0;
  }
  int ret = ensure_extension(a);
  if (ret) return ret;
  if (a->extension->cpusetsize != size) {
    void* p = real::lazy::realloc()(a->extension->cpuset, size);
    if (!p) return ENOMEM;
    a->extension->cpuset = (cpu_set_t*)p;
    a->extension->cpusetsize = size;
  }
  memcpy(a->extension->cpuset, set, size);
  return 0;
}

GOSHIM_EXPORT int pthread_attr_getaffinity_np(const pthread_attr_t* attr, size_t size,
                                              cpu_set_t* set) {
  if (inline_cpuset()) return real::lazy::pthread_attr_getaffinity_np()(attr, size, set);
  const Attr* a = in(attr);
  if (a->extension && a->extension->cpuset) {
    for (size_t i = size; i < a->extension->cpusetsize; i++)
      if (((const char*)a->extension->cpuset)[i] != 0) return EINVAL;
    size_t n = size < a->extension->cpusetsize ? size : a->extension->cpusetsize;
    memcpy(set, a->extension->cpuset, n);
    if (size > n) memset((char*)set + n, 0, size - n);
  } else {
    memset(set, -1, size);  // no information
  }
  return 0;
}

GOSHIM_EXPORT int pthread_attr_setsigmask_np(pthread_attr_t* attr, const sigset_t* mask) {
  Attr* a = in(attr);
  if (!mask) {
    if (a->extension) a->extension->sigmask_set = false;
    return 0;
  }
  int ret = ensure_extension(a);
  if (ret) return ret;
  a->extension->sigmask = *mask;
  a->extension->sigmask_set = true;
  // glibc's internal signals (SIGCANCEL, SIGSETXID) are never blocked.
  sigdelset(&a->extension->sigmask, 32);
  sigdelset(&a->extension->sigmask, 33);
  return 0;
}

GOSHIM_EXPORT int pthread_attr_getsigmask_np(const pthread_attr_t* attr, sigset_t* mask) {
  const Attr* a = in(attr);
  if (!a->extension || !a->extension->sigmask_set) {
    sigemptyset(mask);
    return PTHREAD_ATTR_NO_SIGMASK_NP;
  }
  *mask = a->extension->sigmask;
  return 0;
}

// ---- process defaults ------------------------------------------------------------

GOSHIM_EXPORT int pthread_getattr_default_np(pthread_attr_t* out) {
  if (!mn_active()) {
    auto f = real::lazy::pthread_getattr_default_np();
    return f ? f(out) : ENOSYS;
  }
  MutexGuard g(default_lock);
  init_default_locked();
  int r = attr_copy(out, &default_attr);
  if (r == 0 && in(out)->stacksize == 0) in(out)->stacksize = default_stack_size();
  return r;
}

GOSHIM_EXPORT int pthread_setattr_default_np(const pthread_attr_t* attr) {
  const Attr* a = in(attr);
  int ret = check_policy(a->schedpolicy);
  if (ret) return ret;
  if (a->schedparam.sched_priority > 0) {
    ret = check_priority(a->schedparam.sched_priority, a->schedpolicy);
    if (ret) return ret;
  }
  if (a->stacksize != 0 && (ret = check_stacksize(a->stacksize))) return ret;
  if (a->flags & kStackAddr) return EINVAL;
  // glibc keeps its copy for kernel threads (Ms and 1:1 mode).
  auto f = real::lazy::pthread_setattr_default_np();
  if (f && (ret = f(attr)) != 0) return ret;
  if (!mn_active()) return 0;
  pthread_attr_t temp;
  if ((ret = attr_copy(&temp, attr)) != 0) return ret;
  MutexGuard g(default_lock);
  init_default_locked();
  if (in(&temp)->stacksize == 0)
    in(&temp)->stacksize = in(&default_attr)->stacksize;
  else
    set_default_stack_size(in(&temp)->stacksize);
  pthread_attr_destroy(&default_attr);
  default_attr = temp;
  default_custom.store(true, std::memory_order_release);
  return 0;
}

// ---- a running thread's attributes -----------------------------------------------------

GOSHIM_EXPORT int pthread_getattr_np(pthread_t t, pthread_attr_t* attr) {
  if (!mn_active() || !is_goshim_tp(t)) {
    shim::ensure_real();
    return real::pthread_getattr_np(t, attr);
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  pthread_attr_init(attr);
  Attr* a = in(attr);
  if (gp->join_state.load(std::memory_order_acquire) & kJoinDetached) a->flags |= kDetachState;
  a->stackaddr = (void*)gp->stack.hi;
  a->stacksize = gp->stack.hi - gp->stack.lo;
  a->guardsize = gp->stack.guard;
  a->flags |= kStackAddr;
  a->schedpolicy = gp->sched_policy;
  a->schedparam.sched_priority = gp->sched_priority;
  // Like glibc, report the CPU affinity.
  // The system call fills only the bytes the kernel's mask has: the rest
  // must read as CPUs this thread cannot use, as glibc's
  // pthread_getaffinity_np leaves them.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sys::sched_getaffinity(0, sizeof set, &set) > 0) {
    int r = pthread_attr_setaffinity_np(attr, sizeof set, &set);
    if (r) {
      pthread_attr_destroy(attr);
      return r;
    }
  }
  return 0;
}
