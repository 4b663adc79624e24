// pthread_once: concurrent callers park (on the once word) while the first
// runs the routine. If the routine is cancelled or exits the thread, the
// control goes back to "not run" and waiters retry, as in glibc.
//
// The routine runs inside goshim_once_run (once_unwind.c, built with
// -fexceptions) so that the reset runs during glibc's forced unwinding.
#include <errno.h>
#include <limits.h>
#include <pthread.h>

#include "core/sema.hpp"
#include "shim/shim.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

// glibc's encoding of pthread_once_t: 0 not run, bit 0 in progress,
// bit 1 done (bits 2..31 hold glibc's fork generation, unused here).
constexpr int kInProgress = 1;
constexpr int kDone = 2;

void wait_word(int* once, int val) {
  if (shim::user_g())
    sema_wait(once, (uint32_t)val, 0, WaitReason::Once);
  else
    sys::futex_wait(once, (uint32_t)val, nullptr);  // foreign thread: the kernel
}

void wake_word(int* once) {
  // Wake both kinds of waiter: parked goroutines and foreign threads.
  sema_wake(once, INT_MAX);
  sys::futex_wake(once, INT_MAX);
}

}  // namespace

extern "C" void goshim_once_run(int* once, void (*routine)(void));

extern "C" __attribute__((visibility("hidden"))) void goshim_once_reset(int* once) {
  __atomic_store_n(once, 0, __ATOMIC_RELEASE);
  wake_word(once);
}

GOSHIM_EXPORT int pthread_once(pthread_once_t* control, void (*routine)(void)) {
  int* once = (int*)control;
  for (;;) {
    int v = __atomic_load_n(once, __ATOMIC_ACQUIRE);
    if (v & kDone) return 0;
    if ((v & kInProgress) == 0) {
      if (!__atomic_compare_exchange_n(once, &v, kInProgress, false, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED))
        continue;
      goshim_once_run(once, routine);
      __atomic_store_n(once, kDone, __ATOMIC_RELEASE);
      wake_word(once);
      return 0;
    }
    wait_word(once, v);
  }
}
