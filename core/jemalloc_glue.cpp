// The allocator's own locks and threads, kept out of goshim's runtime.
//
// jemalloc is linked into libgoshim.so (Makefile). Left alone, its calls to
// pthread_mutex_lock/unlock would bind to goshim's interposers: a
// goroutine contending for an arena lock would park on core/sema, and the
// unlock would wake it through ready -> wakep -> startm -> newm, which
// starts a kernel thread with glibc's pthread_create, whose calloc
// re-enters jemalloc in the middle of the operation that was unlocking
// (a crash, or a goroutine waiting forever on a lock it holds itself).
//
// So the build renames jemalloc's references (objcopy --redefine-syms with
// core/jemalloc_glue.syms) to the functions below:
//   - its mutexes are plain futex locks on the pthread_mutex_t's __lock
//     word (private futex; not goshim's runtime Mutex, which carries a
//     lock rank): no libc, no runtime, usable before init, on g0, on
//     foreign threads, in a forked child and from signal handlers. A
//     goroutine that finds one held blocks its M in the kernel, as with
//     glibc's own internal locks.
//   - The word names its holder (kLocked | kWaiters | tag << 2): the tag
//     is the holding goroutine's slot (holder_tag: its vtid, which is
//     fixed per G slot), or 0 for anything that is not a goroutine (a g0,
//     a kernel thread goshim did not create, any thread before the runtime
//     exists). Taking the lock (CAS 0 -> tag|kLocked) publishes the holder
//     and releasing it (exchange -> 0) withdraws it in the same atomic
//     step, so no signal can find the lock taken with the holder unknown
//     (issue 12: a holder recorded by a separate store after the CAS, and
//     cleared by one before the release, left the lock held with no
//     holder when a program signal handler interrupted that window and
//     blocked; sysmon then kept the waiters' Ps and the hang was
//     malloc_signal_park's). A waiter sets kWaiters with a CAS that keeps
//     the tag (never an exchange, which would erase it), and one that wins
//     the lock after sleeping takes it with kWaiters set, as glibc's
//     lll_lock takes it with 2, since others may sleep too.
//     The waiting M publishes the lock it sleeps on (M::alloc_lock_wait)
//     and sysmon decodes the holder (alloc_lock_holder): while the holder
//     runs on a kernel thread (a G Running or in a blocking call, a g0, a
//     foreign thread) the wait ends without any goroutine's help, and
//     sysmon leaves the waiter's P alone; on an overloaded machine the
//     holder often waits for a CPU, and a spare M for the waiter's P
//     blocked behind the same lock in turn (one more kernel thread per
//     sysmon look: tests/preload/alloc_contention). Only a holder that
//     parks (a program signal handler that blocks, having interrupted the
//     allocator) makes sysmon hand the P on, as for glibc's own locks
//     (DESIGN.md, decision 7). A g0 never runs a program handler, and a
//     foreign thread's handler needs no P.
//   - its condition variables (used by its background threads, opt-in
//     with MALLOC_CONF=background_thread:true, which are glibc's own
//     threads, outside the runtime) are a sequence futex below, not
//     glibc's: glibc's condvar retakes the mutex with lll_lock, whose
//     exchange with 2 would erase the holder's tag from the word.
//   - each thread counts the allocator locks it holds (tls_je_locks_held,
//     core/jemalloc_glue.hpp): goshim's malloc must not call mallctl from
//     an allocation made inside jemalloc with one of them held (issue 12).
// Any thread; no locks of goshim's held.
#include <atomic>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <string.h>
#include <time.h>


#include "arch/arch.hpp"
#include "core/gmp.hpp"
#include "core/jemalloc_glue.hpp"
#include "core/proc.hpp"
#include "core/real.hpp"
#include "core/signal.hpp"
#include "syscalls/sys.hpp"

namespace {

// The lock word: pthread_mutex_t's __lock. 0: unlocked.
inline uint32_t* word(pthread_mutex_t* m) { return reinterpret_cast<uint32_t*>(&m->__data.__lock); }

constexpr uint32_t kLocked = 1;   // held
constexpr uint32_t kWaiters = 2;  // held, and a thread may sleep on the word
constexpr int kTagShift = 2;      // the holder's tag above (0: not a goroutine)

// The calling thread's tag. A user G's: its vtid (kVtidBase for main,
// kVtidBase + 1 + slot index for the others, core/proc.cpp: below 2^23
// above kVtidBase, so tag << kTagShift fits in 32 bits), plus one so that
// 0 stays "not a goroutine". A g0 is never named: its M (and so the G)
// may be freed once it exits, and it runs no program handler. Read before
// the CAS: a signal handler that runs in between runs on the same G, even
// if it parks and the G resumes on another M.
inline uint32_t holder_tag() {
  goshim::G* g = goshim::tls_g;  // null before the runtime and on foreign threads
  if (!g || g->is_g0()) return 0;
  return (uint32_t)(g->vtid - goshim::kVtidBase) + 1;
}

inline bool try_take(uint32_t* w, uint32_t v) {
  uint32_t z = 0;
  return __atomic_compare_exchange_n(w, &z, v, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

void lock_slow(pthread_mutex_t* m, uint32_t mine) {
  uint32_t* w = word(m);
  for (int i = 0; i < 100; i++) {  // jemalloc has spun with trylock already
    if (__atomic_load_n(w, __ATOMIC_RELAXED) == 0 && try_take(w, mine)) return;
    goshim::arch::cpu_relax();
  }
  goshim::G* g = goshim::tls_g;
  goshim::M* mp = g ? g->m : nullptr;
  if (mp) mp->alloc_lock_wait.store(m, std::memory_order_relaxed);
  for (;;) {
    uint32_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
    if (v == 0) {
      if (try_take(w, mine | kWaiters)) break;
      continue;
    }
    if (!(v & kWaiters) &&
        !__atomic_compare_exchange_n(w, &v, v | kWaiters, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
      continue;
    goshim::sys::futex_wait(w, v | kWaiters, nullptr);
  }
  if (mp) mp->alloc_lock_wait.store(nullptr, std::memory_order_relaxed);
}

// The condition variable's word: a sequence number that every signal
// bumps. A waiter reads it before releasing the mutex and sleeps only
// while it is unchanged, so no signal is lost; wakeups may be spurious
// (allowed; jemalloc checks its condition again).
inline uint32_t* cond_word(pthread_cond_t* c) {
  static_assert(sizeof(pthread_cond_t) >= sizeof(uint32_t));
  return reinterpret_cast<uint32_t*>(c);
}

}  // namespace

namespace goshim {
__thread uint32_t tls_je_locks_held __attribute__((tls_model("initial-exec")));
__thread pthread_mutex_t* tls_je_unlocking __attribute__((tls_model("initial-exec")));
}  // namespace goshim

namespace {

// Counted before the lock is tried and uncounted after it is released, so
// that the count is never below the locks held, even as seen by a signal
// handler that interrupts this thread (a count above them for a moment
// only defers a thread cache's setup).
inline void count_lock() { goshim::tls_je_locks_held++; }
inline void uncount_lock() {
  if (goshim::tls_je_locks_held > 0) goshim::tls_je_locks_held--;
}

}  // namespace

extern "C" int goshim_je_mutex_lock(pthread_mutex_t* m);
extern "C" int goshim_je_mutex_unlock(pthread_mutex_t* m);

namespace {

// cond_wait with an absolute CLOCK_REALTIME deadline (the default clock:
// jemalloc gives its condvars no attributes), or none.
int cond_wait(pthread_cond_t* c, pthread_mutex_t* m, const struct timespec* abs) {
  if (abs && (abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000)) return EINVAL;
  uint32_t* cw = cond_word(c);
  uint32_t seq = __atomic_load_n(cw, __ATOMIC_RELAXED);
  goshim_je_mutex_unlock(m);
  long r = goshim::sys::futex(cw, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG | (abs ? FUTEX_CLOCK_REALTIME : 0),
                              seq, abs, nullptr, FUTEX_BITSET_MATCH_ANY);
  goshim_je_mutex_lock(m);
  return r == -ETIMEDOUT ? ETIMEDOUT : 0;
}

}  // namespace

extern "C" {

// jemalloc's compiled-in options (its malloc_conf, renamed): automatic
// per-thread caches off, as every goroutine would get one (core/mcache.hpp).
// MALLOC_CONF, read after this, still decides.
__attribute__((visibility("hidden"))) const char* goshim_je_malloc_conf = "tcache:false";

int goshim_je_mutex_init(pthread_mutex_t* m, const pthread_mutexattr_t*) {
  // A lock found held is one this thread took: jemalloc initializes its
  // locks on fresh (zeroed) memory, and again in a fork child (its atfork
  // child handler), where the one thread left is the one that took them
  // all in its prepare handler; that initialization releases them.
  if (__atomic_load_n(word(m), __ATOMIC_RELAXED) != 0) uncount_lock();
  memset(m, 0, sizeof *m);  // PTHREAD_MUTEX_NORMAL, unlocked
  return 0;
}

int goshim_je_mutex_lock(pthread_mutex_t* m) {
  uint32_t mine = holder_tag() << kTagShift | kLocked;
  count_lock();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (!try_take(word(m), mine)) lock_slow(m, mine);
  return 0;
}

int goshim_je_mutex_trylock(pthread_mutex_t* m) {
  count_lock();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (try_take(word(m), holder_tag() << kTagShift | kLocked)) return 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  uncount_lock();
  return EBUSY;
}

int goshim_je_mutex_unlock(pthread_mutex_t* m) {
  // From the exchange to the wake a program signal handler that runs on
  // this thread (and may block) would keep a waiter asleep on the free
  // lock, holding its P: the window is marked (alloc_unlock_finish). An
  // unlock inside such a handler puts the outer mark back.
  pthread_mutex_t* outer = goshim::tls_je_unlocking;
  goshim::tls_je_unlocking = m;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (__atomic_exchange_n(word(m), 0, __ATOMIC_RELEASE) & kWaiters)
    goshim::sys::futex_wake(word(m), 1);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  goshim::tls_je_unlocking = outer;
  uncount_lock();
  return 0;
}

int goshim_je_cond_init(pthread_cond_t* c, const pthread_condattr_t*) {
  memset(c, 0, sizeof *c);
  return 0;
}

int goshim_je_cond_signal(pthread_cond_t* c) {
  __atomic_fetch_add(cond_word(c), 1, __ATOMIC_RELAXED);
  goshim::sys::futex_wake(cond_word(c), 1);
  return 0;
}

int goshim_je_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) { return cond_wait(c, m, nullptr); }

int goshim_je_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m, const struct timespec* t) {
  return cond_wait(c, m, t);
}

int goshim_je_thread_create(pthread_t* th, const pthread_attr_t* a, void* (*fn)(void*), void* arg) {
  goshim::real::resolve();
  return goshim::real::pthread_create(th, a, fn, arg);
}

// jemalloc joins a background thread with its control locks held (the
// program's mallctl turning them off): glibc's join is a cancellation point,
// and unwinding there would leave those locks held for ever. Never one here
// (a pending cancellation is acted upon at the caller's next cancellation
// point: tests/preload/mallctl_cancel_join).
int goshim_je_thread_join(pthread_t th, void** ret) {
  goshim::real::resolve();
  goshim::CancelOff off;
  return goshim::real::pthread_join(th, ret);
}

// jemalloc's abort (a failed safety check, a boot failure) stays glibc's,
// as before goshim exported abort: goshim's (shim/signal_thread.cpp) runs
// through the runtime's signal paths, not to be entered with allocator
// locks held.
void goshim_je_abort(void) {
  goshim::real::resolve();
  if (goshim::real::abort) goshim::real::abort();
  for (;;) __builtin_trap();
}

}  // extern "C"

namespace goshim {

G* alloc_lock_holder(void* mutex) {
  uint32_t tag = __atomic_load_n(word(static_cast<pthread_mutex_t*>(mutex)), __ATOMIC_RELAXED) >> kTagShift;
  if (tag == 0) return nullptr;
  return g_from_vtid((int32_t)(tag - 1) + kVtidBase);
}

void* alloc_wait_suspend(M* mp) {
  void* lk = mp->alloc_lock_wait.exchange(nullptr, std::memory_order_relaxed);
  // A spare wake-up is harmless (a woken waiter looks at the word and
  // sleeps again with kWaiters set); a lost one kept a waiter asleep on a
  // free lock with its P (malloc_signal_park).
  if (lk) goshim::sys::futex_wake(word(static_cast<pthread_mutex_t*>(lk)), 1);
  return lk;
}

void alloc_unlock_finish() {
  // Before or after the exchange: a spare wake-up is harmless (above).
  if (pthread_mutex_t* m = tls_je_unlocking) goshim::sys::futex_wake(word(m), 1);
}

void alloc_wait_resume(M* mp, void* lock) {
  if (lock) mp->alloc_lock_wait.store(lock, std::memory_order_relaxed);
}

}  // namespace goshim
