// pthread_spin_*: glibc's x86-64 encoding (1 unlocked, <= 0 locked; glibc
// locks with `lock decl`, we with a CAS from 1, which mix), so
// process-shared spinlocks work with native processes too.
//
// A waiter spins with PAUSE, but only for a bounded time: then it yields
// (a goroutine to the other goroutines, a foreign thread to the kernel),
// so that on a single P the goroutine holding the lock gets to run.
#include <errno.h>
#include <pthread.h>

#include "arch/arch.hpp"
#include "shim/shim.hpp"
#include "shim/sync.hpp"

using namespace goshim;

namespace {
constexpr int kSpinsBeforeYield = 64;
}

GOSHIM_EXPORT int pthread_spin_init(pthread_spinlock_t* lock, int) {
  __atomic_store_n((int*)lock, 1, __ATOMIC_RELAXED);
  return 0;
}

GOSHIM_EXPORT int pthread_spin_destroy(pthread_spinlock_t*) { return 0; }

GOSHIM_EXPORT int pthread_spin_lock(pthread_spinlock_t* lock) {
  int* l = (int*)lock;
  int spins = 0;
  for (;;) {
    int one = 1;
    if (__atomic_compare_exchange_n(l, &one, 0, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return 0;
    while (__atomic_load_n(l, __ATOMIC_RELAXED) <= 0) {
      arch::cpu_relax();
      if (++spins >= kSpinsBeforeYield) {
        sync_yield();
        spins = 0;
      }
    }
  }
}

GOSHIM_EXPORT int pthread_spin_trylock(pthread_spinlock_t* lock) {
  int one = 1;
  return __atomic_compare_exchange_n((int*)lock, &one, 0, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)
             ? 0
             : EBUSY;
}

GOSHIM_EXPORT int pthread_spin_unlock(pthread_spinlock_t* lock) {
  __atomic_store_n((int*)lock, 1, __ATOMIC_RELEASE);
  return 0;
}
