// pthread_spin_*: glibc's encoding, so process-shared spinlocks work with
// native processes too: on x86-64 1 unlocked, <= 0 locked (glibc locks
// with `lock decl`, we with a CAS from 1, which mix); elsewhere (aarch64)
// the generic 0 unlocked, 1 locked.
//
// A waiter spins with the spin hint (PAUSE, YIELD), but only for a bounded time: then it yields
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
#if defined(__x86_64__)
constexpr int kUnlocked = 1, kLocked = 0;
inline bool held(int v) { return v <= 0; }
#else
constexpr int kUnlocked = 0, kLocked = 1;
inline bool held(int v) { return v != 0; }
#endif
}  // namespace

GOSHIM_EXPORT int pthread_spin_init(pthread_spinlock_t* lock, int) {
  __atomic_store_n((int*)lock, kUnlocked, __ATOMIC_RELAXED);
  return 0;
}

GOSHIM_EXPORT int pthread_spin_destroy(pthread_spinlock_t*) { return 0; }

GOSHIM_EXPORT int pthread_spin_lock(pthread_spinlock_t* lock) {
  int* l = (int*)lock;
  int spins = 0;
  for (;;) {
    int free = kUnlocked;
    if (__atomic_compare_exchange_n(l, &free, kLocked, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return 0;
    while (held(__atomic_load_n(l, __ATOMIC_RELAXED))) {
      arch::cpu_relax();
      if (++spins >= kSpinsBeforeYield) {
        sync_yield();
        spins = 0;
      }
    }
  }
}

GOSHIM_EXPORT int pthread_spin_trylock(pthread_spinlock_t* lock) {
  int free = kUnlocked;
  if (__atomic_compare_exchange_n((int*)lock, &free, kLocked, false, __ATOMIC_ACQUIRE,
                                  __ATOMIC_RELAXED))
    return 0;
  shim::preempt_check();  // see shim.hpp
  return EBUSY;
}

GOSHIM_EXPORT int pthread_spin_unlock(pthread_spinlock_t* lock) {
  __atomic_store_n((int*)lock, kUnlocked, __ATOMIC_RELEASE);
  shim::preempt_check();
  return 0;
}
