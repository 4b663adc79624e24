// The caller's TCB fields for synchronization (see tcb.hpp).
#include "core/tcb.hpp"

#include <pthread.h>

#include "core/proc.hpp"
#include "core/real.hpp"
#include "syscalls/sys.hpp"

namespace goshim::tcb {

constinit std::atomic<size_t> tid_off{0};
constinit std::atomic<size_t> robust_off{0};
constinit std::atomic<size_t> cancel_off{0};
constinit std::atomic<size_t> pd_below{0};

size_t pd_from_tp() {
  if (!arch::kTlsVariantI) return 0;
  size_t below = pd_below.load(std::memory_order_relaxed);
  if (!below) {
    const uint32_t* sz = real::lazy::_thread_db_sizeof_pthread();
    if (!sz || *sz < 1024 || *sz > 16384) return 0;
    below = *sz;
    pd_below.store(below, std::memory_order_relaxed);
  }
  return (size_t)0 - below;
}

// glibc before 2.34 exports no libthread_db descriptor: cancelhandling is
// the one word of the TCB whose bit 0 follows pthread_setcancelstate and
// whose bit 1 follows pthread_setcanceltype (both restored after). Its
// struct pthread is larger than the span scanned. 0 if not found.
size_t find_cancel_offset(uintptr_t me) {
  constexpr size_t kWords = 1536 / sizeof(int);
  static int snap[4][kWords];  // the initial thread, from a constructor
  auto take = [&](int* out) {
    for (size_t i = 0; i < kWords; i++) out[i] = __atomic_load_n((int*)me + i, __ATOMIC_RELAXED);
  };
  int old_state = 0, old_type = 0;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_state);
  take(snap[0]);
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, nullptr);
  take(snap[1]);
  pthread_setcancelstate(old_state, nullptr);
  pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old_type);
  take(snap[2]);
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, nullptr);
  take(snap[3]);
  pthread_setcanceltype(old_type, nullptr);
  size_t found = 0;
  int hits = 0;
  for (size_t i = 1; i < kWords; i++) {
    if ((snap[0][i] ^ snap[1][i]) == 1 && (snap[0][i] & 1) && (snap[2][i] ^ snap[3][i]) == 2 &&
        (snap[3][i] & 2)) {
      found = i * sizeof(int);
      hits++;
    }
  }
  return hits == 1 ? found : 0;
}

void early_init() {
  if (tid_off.load(std::memory_order_acquire) != 0) return;
  if (arch::kTlsVariantI && pd_from_tp() == 0) return;  // every offset stays 0: slow paths
  uintptr_t me = self();
  // {bits, count, offset}: a debugger ABI, so it matches the running glibc.
  const uint32_t* d = real::lazy::_thread_db_pthread_tid();
  const uint32_t* c = real::lazy::_thread_db_pthread_cancelhandling();
  if (c && c[2] > 0 && c[2] < 16384) cancel_off.store(c[2], std::memory_order_relaxed);
  else if (!c) cancel_off.store(find_cancel_offset(me), std::memory_order_relaxed);
  void* head = nullptr;
  size_t len = 0;
  if (sys::get_robust_list(0, &head, &len) != 0) {
    const uint32_t* sz = real::lazy::_thread_db_sizeof_pthread();
    if (sz && *sz <= 16384) head = (void*)scan_robust_head(me, *sz);
  }
  if ((uintptr_t)head > me && (uintptr_t)head < me + 16384)
    robust_off.store((uintptr_t)head - me, std::memory_order_relaxed);
  // Use the tid offset only if it holds this thread's kernel tid now (the
  // constructor runs on the initial thread, before goshim renames it).
  if (d && d[2] > 0 && d[2] < 16384 &&
      *(const pid_t*)(me + d[2]) == (pid_t)sys::gettid())
    tid_off.store(d[2], std::memory_order_release);
}

uintptr_t scan_robust_head(uintptr_t pd, size_t size) {
  // futex_offset: offsetof(__lock) - offsetof(__list.__next) in a mutex:
  constexpr long kFutexOffset = -32;  // __lock at 0, __list.__next at 32 (shim/sync.hpp)
  uintptr_t found = 0;
  int hits = 0;
  for (size_t off = 8; off + 24 <= size; off += 8) {
    uintptr_t a = pd + off;
    if (*(uintptr_t*)a == a && *(long*)(a + 8) == kFutexOffset && *(uintptr_t*)(a - 8) == a) {
      found = a;
      hits++;
    }
  }
  return hits == 1 ? found : 0;
}

namespace {
constexpr uint32_t kVirtualSpan = (1u << 30) - (uint32_t)kVtidBase;  // [kVtidBase, 2^30)
std::atomic<uint32_t> shared_offset{0};
std::atomic<bool> have_offset{false};
}  // namespace

void reset_shared_offset() {
  uint32_t pid = (uint32_t)sys::getpid();
  uint32_t h = pid * 2654435761u;  // Knuth's multiplicative hash
  h ^= h >> 15;
  shared_offset.store(h % kVirtualSpan, std::memory_order_relaxed);
  have_offset.store(true, std::memory_order_release);
}

pid_t shared_tid_of(pid_t tid) {
  if (!is_virtual_tid(tid)) return tid;
  if (!have_offset.load(std::memory_order_acquire)) reset_shared_offset();
  uint32_t off = shared_offset.load(std::memory_order_relaxed);
  return (pid_t)((uint32_t)kVtidBase + ((uint32_t)(tid - kVtidBase) + off) % kVirtualSpan);
}

pid_t tid_of_shared(pid_t sid) {
  if (!is_virtual_tid(sid)) return sid;
  if (!have_offset.load(std::memory_order_acquire)) reset_shared_offset();
  uint32_t off = shared_offset.load(std::memory_order_relaxed);
  return (pid_t)((uint32_t)kVtidBase +
                 ((uint32_t)(sid - kVtidBase) + kVirtualSpan - off) % kVirtualSpan);
}

pid_t slow_tid() {
  // Before early_init: no goroutine exists yet, so the kernel tid is what
  // glibc has in THREAD_SELF->tid.
  return (pid_t)sys::gettid();
}

bool self_cancel_pending() {
  size_t off = cancel_off.load(std::memory_order_relaxed);
  if (!off) return false;
  int ch = __atomic_load_n((const int*)(self() + off), __ATOMIC_ACQUIRE);
  // glibc's cancel_enabled_and_canceled: CANCELSTATE (1), CANCELED (8),
  // EXITING (16), TERMINATED (32).
  return (ch & (1 | 8 | 16 | 32)) == 8;
}

bool self_async_cancel() {
  size_t off = cancel_off.load(std::memory_order_relaxed);
  if (!off) return false;
  int ch = __atomic_load_n((const int*)(self() + off), __ATOMIC_ACQUIRE);
  // CANCELSTATE (1) clear, CANCELTYPE (2) set, EXITING (16), TERMINATED (32) clear.
  return (ch & (1 | 2 | 16 | 32)) == 2;
}

bool self_cancel_requested() {
  size_t off = cancel_off.load(std::memory_order_relaxed);
  if (!off) return false;
  int ch = __atomic_load_n((const int*)(self() + off), __ATOMIC_ACQUIRE);
  // CANCELING (4) or CANCELED (8): glibc before 2.34 sets only CANCELING
  // before it sends SIGCANCEL to an asynchronous target.
  return (ch & (4 | 8)) && !(ch & (16 | 32));
}

RobustHead* self_robust() {
  size_t off = robust_off.load(std::memory_order_relaxed);
  if (off) return (RobustHead*)(self() + off);
  void* head = nullptr;
  size_t len = 0;
  if (sys::get_robust_list(0, &head, &len) != 0) return nullptr;
  return (RobustHead*)head;
}

}  // namespace goshim::tcb
