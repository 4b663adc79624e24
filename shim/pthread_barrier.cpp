// pthread_barrier_*: barriers over core/syncwait, in glibc's 32 bytes.
//
//   arrived @0, round @4   one 64-bit word: each arrival adds 1 to it; the
//                          count-th arrival stores {round + 1, 0}. Exactly
//                          count threads take part in a round, so no one
//                          arrives for the next round before that store.
//                          The others wait while round is unchanged.
//   count   @8             threshold
//   shared  @12            glibc's encoding: FUTEX_PRIVATE (0) or FUTEX_SHARED (128)
//   inside  @16            threads still touching the barrier; bit 31: a
//                          pthread_barrier_destroy waits for them to leave.
//
// Process-shared barriers wait on the kernel futex; they interoperate with
// other goshim processes only (glibc's algorithm differs).
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "shim/shim.hpp"
#include "shim/sync.hpp"

using namespace goshim;
using namespace goshim::shim;

namespace {

struct BarrierObj {
  uint64_t word;  // arrived (low 32 bits), round (high 32 bits)
  uint32_t count;
  int shared;
  uint32_t inside;
  uint32_t pad[3];
};
static_assert(sizeof(BarrierObj) == sizeof(pthread_barrier_t), "pthread_barrier_t overlay");

constexpr uint32_t kDestroying = 1u << 31;
constexpr uint32_t kInThreshold = UINT_MAX / 2;  // BARRIER_IN_THRESHOLD

uint32_t* round_word(BarrierObj* b) { return (uint32_t*)&b->word + 1; }  // little-endian

bool is_shared(const BarrierObj* b) { return b->shared != kFutexPrivate; }

void leave(BarrierObj* b) {
  bool shared = is_shared(b);
  uint32_t v = __atomic_fetch_sub(&b->inside, 1, __ATOMIC_RELEASE);
  if ((v & ~kDestroying) == 1 && (v & kDestroying))
    sync_wake(&b->inside, INT_MAX, shared);  // address only: b may be gone
}

}  // namespace

GOSHIM_EXPORT int pthread_barrier_init(pthread_barrier_t* barrier,
                                       const pthread_barrierattr_t* attr, unsigned count) {
  if (count == 0 || count >= kInThreshold) return EINVAL;
  BarrierObj* b = (BarrierObj*)barrier;
  memset(b, 0, sizeof *b);
  b->count = count;
  int pshared = attr ? *(const int*)attr : PTHREAD_PROCESS_PRIVATE;
  b->shared = pshared == PTHREAD_PROCESS_PRIVATE ? kFutexPrivate : kFutexShared;
  return 0;
}

GOSHIM_EXPORT int pthread_barrier_wait(pthread_barrier_t* barrier) {
  BarrierObj* b = (BarrierObj*)barrier;
  bool shared = is_shared(b);
  __atomic_fetch_add(&b->inside, 1, __ATOMIC_RELAXED);
  uint64_t old = __atomic_fetch_add(&b->word, 1, __ATOMIC_ACQ_REL);
  uint32_t arrived = (uint32_t)old + 1;
  uint32_t round = (uint32_t)(old >> 32);
  if (arrived == b->count) {
    __atomic_store_n(&b->word, (uint64_t)(round + 1) << 32, __ATOMIC_RELEASE);
    sync_wake(round_word(b), INT_MAX, shared);
    leave(b);
    return PTHREAD_BARRIER_SERIAL_THREAD;
  }
  SyncDeadline none;
  while (__atomic_load_n(round_word(b), __ATOMIC_ACQUIRE) == round)
    sync_wait(round_word(b), round, none, WaitReason::Barrier, shared);
  leave(b);
  return 0;
}

GOSHIM_EXPORT int pthread_barrier_destroy(pthread_barrier_t* barrier) {
  BarrierObj* b = (BarrierObj*)barrier;
  bool shared = is_shared(b);
  // Threads released from the last round may still be on their way out.
  uint32_t v = __atomic_fetch_or(&b->inside, kDestroying, __ATOMIC_ACQUIRE);
  SyncDeadline none;
  while (v & ~kDestroying) {
    sync_wait(&b->inside, v | kDestroying, none, WaitReason::Barrier, shared);
    v = __atomic_load_n(&b->inside, __ATOMIC_ACQUIRE);
  }
  return 0;
}

// ---- pthread_barrierattr_* (glibc: struct { int pshared; }) -------------------------

GOSHIM_EXPORT int pthread_barrierattr_init(pthread_barrierattr_t* attr) {
  memset(attr, 0, sizeof *attr);
  *(int*)attr = PTHREAD_PROCESS_PRIVATE;
  return 0;
}

GOSHIM_EXPORT int pthread_barrierattr_destroy(pthread_barrierattr_t*) { return 0; }

GOSHIM_EXPORT int pthread_barrierattr_getpshared(const pthread_barrierattr_t* attr, int* pshared) {
  *pshared = *(const int*)attr;
  return 0;
}

GOSHIM_EXPORT int pthread_barrierattr_setpshared(pthread_barrierattr_t* attr, int pshared) {
  if (pshared != PTHREAD_PROCESS_PRIVATE && pshared != PTHREAD_PROCESS_SHARED) return EINVAL;
  *(int*)attr = pshared;
  return 0;
}
