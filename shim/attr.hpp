// Thread attributes: glibc's pthread_attr_t layout, read and written by
// goshim's own pthread_attr_* (shim/pthread_attr.cpp).
#pragma once

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>

#include "core/proc.hpp"

namespace goshim::attr {

// glibc's struct pthread_attr (sysdeps/nptl/internaltypes.h).
struct Extension {
  cpu_set_t* cpuset;
  size_t cpusetsize;
  sigset_t sigmask;
  bool sigmask_set;
};

struct Attr {
  struct sched_param schedparam;
  int schedpolicy;
  int flags;
  size_t guardsize;
  void* stackaddr;  // the stack's top (it grows down), when ATTR_FLAG_STACKADDR
  size_t stacksize;
  Extension* extension;
  void* unused;
};
static_assert(sizeof(Attr) <= sizeof(pthread_attr_t), "pthread_attr_t layout");

enum : int {
  kDetachState = 0x0001,
  kNotInheritSched = 0x0002,
  kScopeProcess = 0x0004,
  kStackAddr = 0x0008,
  kOldAttr = 0x0010,
  kSchedSet = 0x0020,
  kPolicySet = 0x0040,
};

inline Attr* in(pthread_attr_t* a) { return reinterpret_cast<Attr*>(a); }
inline const Attr* in(const pthread_attr_t* a) { return reinterpret_cast<const Attr*>(a); }

// In a fork child: the default attribute's lock may have been held.
void after_fork();

// Translates a pthread_create attribute (nullptr: the defaults) into what
// core needs. Returns 0 or glibc's error code.
int to_create_attr(const pthread_attr_t* a, CreateAttr* out);

}  // namespace goshim::attr
