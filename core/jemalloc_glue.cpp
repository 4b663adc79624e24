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
//   - its mutexes are plain futex locks (on the pthread_mutex_t's __lock
//     word, the 0/1/2 protocol of glibc's lll_lock, private futex; not
//     goshim's runtime Mutex, which carries a lock rank):
//     no libc, no runtime, usable before init, on g0, on foreign threads,
//     in a forked child and from signal handlers. A goroutine that finds
//     one held blocks its M in the kernel, as with glibc's own internal
//     locks. The holder is recorded (a user G, in the mutex's __list
//     field, which glibc's NORMAL mutexes and condvars leave alone) and
//     the waiting M publishes the lock it sleeps on (M::alloc_lock_wait):
//     while the holder runs on a kernel thread (a G Running or in a
//     blocking call, a g0, a foreign thread) the wait ends without any
//     goroutine's help, and sysmon leaves the waiter's P alone; on an
//     overloaded machine the holder often waits for a CPU, and a spare M
//     for the waiter's P blocked behind the same lock in turn (one more
//     kernel thread per sysmon look: tests/preload/alloc_contention).
//     Only a holder that parks (a program signal handler that blocks,
//     having interrupted the allocator) makes sysmon hand the P on, as for
//     glibc's own locks (DESIGN.md, decision 7).
//   - its condition variables and background threads (opt-in with
//     MALLOC_CONF=background_thread:true) are glibc's own, on a real kernel
//     thread: glibc's condvar releases and retakes the mutex with the same
//     lll_lock protocol.
// Any thread; no locks of goshim's held.
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>


#include "arch/arch.hpp"
#include "core/gmp.hpp"
#include "core/jemalloc_glue.hpp"
#include "core/rawlog.hpp"
#include "core/real.hpp"
#include "core/signal.hpp"
#include "syscalls/sys.hpp"

namespace {

// The lock word: pthread_mutex_t's __lock, 0 unlocked, 1 locked, 2 locked
// with (possible) kernel waiters, as glibc's lll_lock.
inline int* word(pthread_mutex_t* m) { return &m->__data.__lock; }

// The holder: the user G that took the lock, or null (see the top).
inline std::atomic<goshim::G*>* holder(pthread_mutex_t* m) {
  static_assert(sizeof(m->__data.__list.__prev) == sizeof(std::atomic<goshim::G*>));
  return reinterpret_cast<std::atomic<goshim::G*>*>(&m->__data.__list.__prev);
}

// A g0 is never recorded: its M (and so the G) may be freed once it exits.
inline goshim::G* self_holder() {
  goshim::G* g = goshim::tls_g;  // null before the runtime and on foreign threads
  return g && !g->is_g0() ? g : nullptr;
}

void lock_slow(pthread_mutex_t* m) {
  int* w = word(m);
  for (int i = 0; i < 100; i++) {  // jemalloc has spun with trylock already
    int z = 0;
    if (__atomic_load_n(w, __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(w, &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return;
    goshim::arch::cpu_relax();
  }
  goshim::G* g = goshim::tls_g;
  goshim::M* mp = g ? g->m : nullptr;
  if (mp) mp->alloc_lock_wait.store(m, std::memory_order_relaxed);
  while (__atomic_exchange_n(w, 2, __ATOMIC_ACQUIRE) != 0) goshim::sys::futex_wait(w, 2, nullptr);
  if (mp) mp->alloc_lock_wait.store(nullptr, std::memory_order_relaxed);
}

// glibc's condvar functions (the default, GLIBC_2.3.2 versions), from the
// real-function table: only background threads use them.
template <typename F>
F libc_fn(F f, const char* name) {
  if (!f) goshim::fatalf("cannot resolve libc's %s", name);
  return f;
}

}  // namespace

extern "C" {

// jemalloc's compiled-in options (its malloc_conf, renamed): automatic
// per-thread caches off, as every goroutine would get one (core/mcache.hpp).
// MALLOC_CONF, read after this, still decides.
__attribute__((visibility("hidden"))) const char* goshim_je_malloc_conf = "tcache:false";

int goshim_je_mutex_init(pthread_mutex_t* m, const pthread_mutexattr_t*) {
  memset(m, 0, sizeof *m);  // PTHREAD_MUTEX_NORMAL, unlocked
  return 0;
}

int goshim_je_mutex_lock(pthread_mutex_t* m) {
  int z = 0;
  if (!__atomic_compare_exchange_n(word(m), &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    lock_slow(m);
  holder(m)->store(self_holder(), std::memory_order_relaxed);
  return 0;
}

int goshim_je_mutex_trylock(pthread_mutex_t* m) {
  int z = 0;
  if (!__atomic_compare_exchange_n(word(m), &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    return EBUSY;
  holder(m)->store(self_holder(), std::memory_order_relaxed);
  return 0;
}

int goshim_je_mutex_unlock(pthread_mutex_t* m) {
  m->__data.__owner = 0;  // glibc's condvar relock records one and checks it is clear
  holder(m)->store(nullptr, std::memory_order_relaxed);
  if (__atomic_exchange_n(word(m), 0, __ATOMIC_RELEASE) == 2) goshim::sys::futex_wake(word(m), 1);
  return 0;
}

int goshim_je_cond_init(pthread_cond_t* c, const pthread_condattr_t* a) {
  return libc_fn(goshim::real::lazy::pthread_cond_init(), "pthread_cond_init")(c, a);
}

int goshim_je_cond_signal(pthread_cond_t* c) {
  return libc_fn(goshim::real::lazy::pthread_cond_signal(), "pthread_cond_signal")(c);
}

int goshim_je_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  return libc_fn(goshim::real::lazy::pthread_cond_wait(), "pthread_cond_wait")(c, m);
}

int goshim_je_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m, const struct timespec* t) {
  return libc_fn(goshim::real::lazy::pthread_cond_timedwait(), "pthread_cond_timedwait")(c, m, t);
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

}  // extern "C"

namespace goshim {

G* alloc_lock_holder(void* mutex) {
  return holder(static_cast<pthread_mutex_t*>(mutex))->load(std::memory_order_relaxed);
}

}  // namespace goshim
