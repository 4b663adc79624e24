// POSIX semaphores: glibc's 64-bit-atomics protocol and layout (value in
// the low 32 bits of `data`, the number of waiters in the high 32 bits,
// `private` = FUTEX_PRIVATE (0) or FUTEX_SHARED (128)), so unnamed
// process-shared semaphores and named ones (sem_open) work with other
// processes, native or under goshim.
//
// A waiter registers in nwaiters and waits while the value is 0; sem_post
// adds a token and wakes one waiter if any registered. Private semaphores
// wait through core/syncwait (goroutines park); shared ones on the kernel
// futex of the value word (a goroutine inside a blocking call). As in
// glibc, sem_wait and sem_timedwait return EINTR when a signal handler
// interrupts them, except that an untimed wait restarts when the handler
// has SA_RESTART (the kernel's rule for futex waits).
//
// sem_open/sem_close/sem_unlink are glibc's, run as blocking calls (file
// I/O under a libc-internal lock).
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <semaphore.h>
#include <pthread.h>
#include <stdarg.h>

#include "core/memclass.hpp"
#include "core/signal.hpp"
#include "shim/shim.hpp"
#include "shim/sync.hpp"
#include "syscalls/blocking.hpp"

using namespace goshim;
using namespace goshim::shim;

namespace {

struct SemObj {  // struct new_sem
  uint64_t data;
  int priv;
  int pad;
};
static_assert(sizeof(SemObj) <= sizeof(sem_t), "sem_t overlay");

constexpr int kNwaitersShift = 32;
constexpr uint64_t kOneWaiter = (uint64_t)1 << kNwaitersShift;
constexpr uint32_t kValueMask = ~0u;

uint32_t* value_word(SemObj* s) { return (uint32_t*)&s->data; }  // little-endian
bool is_shared(const SemObj* s) { return s->priv != kFutexPrivate; }

// Takes a token if there is one. definitive: retry spurious CAS failures.
bool try_take(SemObj* s, bool definitive) {
  uint64_t d = __atomic_load_n(&s->data, __ATOMIC_RELAXED);
  do {
    if ((d & kValueMask) == 0) return false;
    if (__atomic_compare_exchange_n(&s->data, &d, d - 1, true, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED))
      return true;
  } while (definitive);
  return false;
}

// sem_wait and friends are cancellation points: at entry and while blocked.
void testcancel() {
  if (shim::user_g())
    cancel_point();
  else
    pthread_testcancel();  // glibc's, for a foreign thread
}

int wait_slow(SemObj* s, clockid_t clk, const struct timespec* abstime) {
  bool shared = is_shared(s);
  SyncDeadline dl{clk, abstime};
  uint64_t d = __atomic_fetch_add(&s->data, kOneWaiter, __ATOMIC_RELAXED);
  for (;;) {
    if ((d & kValueMask) == 0) {
      int r = sync_wait(value_word(s), 0, dl, WaitReason::Semaphore, shared, ~0u, nullptr, true);
      if (r == ETIMEDOUT || r == EINTR) {
        __atomic_fetch_sub(&s->data, kOneWaiter, __ATOMIC_RELAXED);
        // (glibc's __sem_wait_cleanup did the above.) glibc's futex call
        // acts on a pending cancellation even past the deadline (but not
        // before 1970: no call then).
        if (r == EINTR || (abstime && abstime->tv_sec >= 0)) testcancel();
        errno = r;
        return -1;
      }
      d = __atomic_load_n(&s->data, __ATOMIC_RELAXED);
    } else if (__atomic_compare_exchange_n(&s->data, &d, d - 1 - kOneWaiter, true,
                                           __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      return 0;
    }
  }
}

}  // namespace

GOSHIM_EXPORT int sem_init(sem_t* sem, int pshared, unsigned value) {
  if (value > SEM_VALUE_MAX) {
    errno = EINVAL;
    return -1;
  }
  SemObj* s = (SemObj*)sem;
  s->data = value;
  s->pad = 0;
  s->priv = pshared ? kFutexShared : kFutexPrivate;
  return 0;
}

GOSHIM_EXPORT int sem_destroy(sem_t*) { return 0; }

GOSHIM_EXPORT int sem_post(sem_t* sem) {
  SemObj* s = (SemObj*)sem;
  uint64_t d = __atomic_load_n(&s->data, __ATOMIC_RELAXED);
  do {
    if ((d & kValueMask) == SEM_VALUE_MAX) {
      errno = EOVERFLOW;
      return -1;
    }
  } while (!__atomic_compare_exchange_n(&s->data, &d, d + 1, true, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED));
  if ((d >> kNwaitersShift) > 0) sync_wake(value_word(s), 1, is_shared(s));
  shim::preempt_check();
  return 0;
}

GOSHIM_EXPORT int sem_wait(sem_t* sem) {
  testcancel();
  SemObj* s = (SemObj*)sem;
  if (try_take(s, false)) return 0;
  return wait_slow(s, CLOCK_REALTIME, nullptr);
}

GOSHIM_EXPORT int sem_trywait(sem_t* sem) {
  if (try_take((SemObj*)sem, true)) return 0;
  shim::preempt_check();
  errno = EAGAIN;
  return -1;
}

GOSHIM_EXPORT int sem_timedwait(sem_t* sem, const struct timespec* abstime) {
  if (!valid_nsec(abstime)) {
    errno = EINVAL;
    return -1;
  }
  testcancel();
  SemObj* s = (SemObj*)sem;
  if (try_take(s, false)) return 0;
  return wait_slow(s, CLOCK_REALTIME, abstime);
}

GOSHIM_EXPORT int sem_clockwait(sem_t* sem, clockid_t clk, const struct timespec* abstime) {
  if (!valid_clock(clk) || !valid_nsec(abstime)) {
    errno = EINVAL;
    return -1;
  }
  SemObj* s = (SemObj*)sem;
  if (try_take(s, false)) return 0;
  return wait_slow(s, clk, abstime);
}

GOSHIM_EXPORT int sem_getvalue(sem_t* sem, int* sval) {
  *sval = (int)(__atomic_load_n(&((SemObj*)sem)->data, __ATOMIC_RELAXED) & kValueMask);
  return 0;
}

// ---- named semaphores ---------------------------------------------------------------

GOSHIM_EXPORT sem_t* sem_open(const char* name, int oflag, ...) {
  shim::ensure_real();
  mode_t mode = 0;
  unsigned value = 0;
  if (oflag & O_CREAT) {
    va_list ap;
    va_start(ap, oflag);
    mode = va_arg(ap, mode_t);
    value = va_arg(ap, unsigned);
    va_end(ap);
  }
  sem_t* r;
  if (shim::user_g()) {
    BlockingCall bc(BlockKind::Short, "sem_open");
    r = real::sem_open(name, oflag, mode, value);
  } else {
    r = real::sem_open(name, oflag, mode, value);
  }
  memclass_mapping_changed();  // glibc mapped it MAP_SHARED behind our back
  return r;
}

GOSHIM_EXPORT int sem_close(sem_t* sem) {
  shim::ensure_real();
  if (shim::user_g()) {
    BlockingCall bc(BlockKind::Short, "sem_close");
    return real::sem_close(sem);
  }
  return real::sem_close(sem);
}

GOSHIM_EXPORT int sem_unlink(const char* name) {
  shim::ensure_real();
  if (shim::user_g()) {
    BlockingCall bc(BlockKind::Short, "sem_unlink");
    return real::sem_unlink(name);
  }
  return real::sem_unlink(name);
}
