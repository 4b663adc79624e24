// Allocation caches per M, not per goroutine (Go's mcache is per P).
//
// jemalloc gives every thread a cache of freed objects (its tcache), kept
// in the thread's TLS: under goshim every goroutine has its own TLS block,
// so every goroutine that ever allocated would keep a cache of its own,
// up to hundreds of KiB each (measured: 143 KiB per idle thread that had
// allocated, against 21 KiB natively). Instead:
//   - goshim's jemalloc starts with its automatic caches off (malloc_conf
//     "tcache:false", core/jemalloc_glue.cpp; MALLOC_CONF can turn them
//     on again);
//   - a goroutine (or g0) allocates through its M's explicit cache
//     (jemalloc's tcache.create), made at the M's first allocation and
//     destroyed when the M's thread ends;
//   - a kernel thread that is no M (a foreign thread, every thread in 1:1
//     mode, the process before goshim starts) turns its own automatic
//     cache on at its first allocation, as it had it before.
// A goroutine uses its M's cache alone for the length of one call
// (alloc_enter .. alloc_leave), with plain loads and stores (a locked
// instruction costs 20 ns here): only the M's own thread claims it. The
// one way two goroutines could meet in it: a signal handler run on a
// goroutine in the middle of an allocation parks it or is preempted, the
// M runs others, and the goroutine goes on later, maybe on another M. So
// a goroutine announces the M it is about to claim (G::alloc_m) before it
// looks, and when it leaves its M with that set (mcache_lend, from the
// scheduler), the cache is marked lent to it: the M's other goroutines
// allocate without a cache (from the arena, under its lock) until it is
// done. A handler that allocates while the goroutine it interrupted holds
// the cache (undefined natively) gets no cache either.
// Any thread, signal handlers included (as far as malloc itself is).
#pragma once
#include <atomic>

#include "core/gmp.hpp"

namespace goshim {

// jemalloc's flags (<jemalloc/jemalloc.h>): a cache index, no cache.
constexpr int kMallocxZero = 0x40;
constexpr int mallocx_tcache(int ind) { return (int)(((unsigned)ind + 2) << 8); }
constexpr int kMallocxTcacheNone = mallocx_tcache(-1);
constexpr int mallocx_arena(unsigned ind) { return (int)((ind + 1) << 20); }

struct AllocCtx {
  M* m;       // the M whose cache is claimed, or nullptr
  M* prev;    // the goroutine's alloc_m before (a nested call's)
  int flags;  // for mallocx and friends; 0: the thread's automatic cache
};

// Free pages go back to the kernel while the process idles (Go's
// scavenger): jemalloc returns a freed extent's pages (its dirty pages)
// along a decay curve (dirty_decay_ms, 10 s), but only when asked, which
// it does every 1,000 allocations a thread makes. A goroutine counts its
// own (jemalloc's thread state is per goroutine), so a server that goes
// idle after a burst kept every page its connections had freed, for good
// (MariaDB after 3,000 connections closed: 2.6 GiB; glibc munmaps a large
// block at free). So an M about to sleep (find_runnable, without its P)
// asks jemalloc to decay, at most once per kPurgePeriodNs for the whole
// process, and until a decay period (plus 2 s) has passed since an M last
// came here after running goroutines (`active`) it returns the time it
// should ask again: the M sleeps in netpoll until then at the latest. No allocator
// lock is taken on sysmon (a holder parked by a program signal handler
// would stop it) and no kernel thread is added.
// An M woken for that which finds no P asks anyway (its P's goroutine may
// sit in a long blocking call, e.g. waitpid).
// On g0, Without P, no runtime locks. Returns 0 or the next asking time
// (nanotime).
int64_t mcache_idle_purge(bool active);
// Whether an ask is due now. Any thread.
bool mcache_purge_due();

// goshim's own threads without an M (sysmon, the privfd thread, the M
// starter: tls_g is sysmon_g(), whose m is null) allocate from an arena of
// their own, without a cache (mcache_runtime_arena_init), so that they never
// wait for an allocator lock a goroutine may hold. Such a goroutine may be
// stopped there indefinitely: a program signal handler that interrupted
// it in the allocator blocks, waiting for another goroutine that needs a
// P, which sysmon gives it by retiring a stuck M's P and starting an M for
// it; glibc's pthread_create callocs the new thread's DTV. With the
// arenas shared, sysmon's first such calloc waited for jemalloc's
// arenas_lock, held by the interrupted goroutine (arena_new), and the
// process stopped for good (tests/preload/malloc_signal_park, about 1 run
// in 90 at GOSHIM_MAXPROCS=2). kMallocxTcacheNone until that arena exists.
extern int runtime_thread_alloc_flags;
// Creates that arena (runtime init, before goshim's own threads start).
void mcache_runtime_arena_init();
// On such a thread, at its start: its allocator thread state is set up
// now (that takes a lock shared with every thread, once), not at its
// first allocation.
void mcache_runtime_thread_start();

int mcache_create(M* mp);        // the M's cache index, or -1 (none to be had)
void mcache_destroy(M* mp);      // on the M's own thread, at its end: no cache after it
void thread_cache_enable();      // a kernel thread's automatic cache, at an allocation
extern __thread bool tls_thread_cache_on __attribute__((tls_model("initial-exec")));
// A short-lived kernel thread of goshim's that is no M and never will be
// (tls::init's probe thread): it allocates from arena 0 without a cache
// instead of turning its automatic cache on. jemalloc binds a thread that
// allocates for the first time to an arena with no thread yet, creating
// one (arena_choose): the probe, which allocates once (glibc's dlopen of
// the unwinder for its cancellation), made arena 1 in every process, about
// 25 page faults and 30 us of every start. Set by the thread itself, before
// its first allocation.
extern __thread bool tls_alloc_arena0 __attribute__((tls_model("initial-exec")));

// A kernel thread that is no M gives its automatic cache back when it goes
// to sleep in one of goshim's waits (core/sema's kernel-thread wait: the
// program's mutexes, condvars, semaphores, barriers, rwlocks, pthread_once
// in 1:1 mode and on foreign threads), as an M's cache goes with its
// thread. jemalloc keeps a thread's cache (freed objects, and the cache's
// own arrays) for as long as the thread lives, used or not: 2,000 1:1
// threads that allocated and then waited held 142 KiB each (jemalloc 5.3,
// as natively with jemalloc; 171 KiB with Debian 11's 5.2), glibc's 21
// (test malloc_cache_mem, mode o1 and Debian 11); flushing the cache
// alone left 45 KiB. Giving it back and making it again costs about 30 us
// of CPU, so:
//   - it is given back only when the thread's allocator traffic (bytes
//     allocated plus bytes freed: jemalloc's own per-thread counters)
//     since the cache was turned on reached kThreadCacheReleaseBytes (a
//     thread that sleeps between a few small allocations keeps it);
//   - the thread then allocates from its arena, without a cache (as M:N
//     goroutines without one do, 20-40 ns more a call), and its
//     kThreadCacheReenableAllocs-th allocation turns the cache on again
//     (about what the cache's making costs; frees never do: alloc_enter):
//     a thread that allocates little between sleeps no longer pays to
//     make a cache it would not use.
// Once the thread's pthread key destructors begin (thread_cache_exiting),
// a cache given back is turned on again, once, before any destructor runs
// (jemalloc's destroys it and, when the thread was its arena's last one,
// purges that arena: how the memory freed by exited threads goes back at
// once in 1:1 mode, dbmem_idle_return in mode o1), and from then on the
// cache is left as it is: one turned on again after jemalloc's key
// destructor ran for the last time stayed linked into its arena from a TLS
// block glibc then freed or reused, and a later thread crashed (test
// malloc_cache_cycle, whose last destructor round allocates: SIGSEGV in 2
// of 3 runs in mode o1 without this).
// A kernel thread that sleeps in a system call passed to glibc (read,
// poll, ...) keeps its cache, as it would under jemalloc natively.
// The caller holds no lock of goshim's and is not inside the allocator (a
// wait that may park); the calling thread only.
constexpr uint64_t kThreadCacheReleaseBytes = 64 * 1024;
constexpr int kThreadCacheReenableAllocs = 1024;
// A thread whose cache, given back at a sleep, was needed again soon (it
// was woken within kThreadCacheDeferNs: ping-pong between threads that
// allocate 64 KiB or more a turn ran 3.7 times the CPU time, mostly
// allocating without a cache) gives it back from then on only once a sleep
// has lasted kThreadCacheDeferNs (the wait sleeps that long first).
constexpr int64_t kThreadCacheDeferNs = 4 * 1000 * 1000;
enum class CacheIdle { None, Released, Deferred };
CacheIdle thread_cache_idle_slow();
// At a sleep (the caller is about to wait in the kernel).
inline CacheIdle thread_cache_idle() {
  if (__builtin_expect(tls_thread_cache_on, 0) && tls_g == nullptr) return thread_cache_idle_slow();
  return CacheIdle::None;
}
// After a sleep that began with Released, slept_ns long.
void thread_cache_slept(int64_t slept_ns);
// A Deferred sleep lasted kThreadCacheDeferNs: give the cache back now.
void thread_cache_release_now();
// A kernel thread that is no M is about to run its key destructors
// (shim/pthread_key.cpp, from goshim's glibc key): a cache given back is
// turned on again now, and from here on it is neither given back nor
// turned on again. A thread that freed kThreadExitPurgeBytes or more in
// its life purges its arena's dirty pages (arena.<i>.purge) here: memory
// freed by exited threads goes back at once, as with glibc, also when the
// arena is shared with a thread that lives on. The calling thread only.
constexpr uint64_t kThreadExitPurgeBytes = 64 * 1024;
void thread_cache_exiting();

// for_free: a free() turns no kernel thread's cache on. jemalloc's free
// sets up only a minimal thread state on a thread that never allocated,
// because such a thread may be past its key destructors (glibc's
// start_thread frees other threads' cached stacks' DTVs after them); a
// cache turned on there stayed linked into its arena from a TLS block
// glibc then unmapped or reused, and the next thread to link one crashed
// (1:1 mode: net_echo, malloc from a thread that had only freed).
inline AllocCtx alloc_enter(bool for_free = false) {
  G* gp = tls_g;
  if (gp == nullptr) {
    if (__builtin_expect(!tls_thread_cache_on, 0) && !for_free) {
      if (tls_alloc_arena0) return {nullptr, nullptr, mallocx_arena(0) | kMallocxTcacheNone};
      thread_cache_enable();
    }
    return {nullptr, nullptr, 0};
  }
  M* mp = gp->m;
  if (mp == nullptr) return {nullptr, nullptr, runtime_thread_alloc_flags};
  int ind = mp->tcache.load(std::memory_order_acquire);
  if (__builtin_expect(ind < 0, 0)) {
    ind = mcache_create(mp);
    if (ind < 0) return {nullptr, nullptr, kMallocxTcacheNone};
  }
  M* prev = gp->alloc_m;
  gp->alloc_m = mp;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  uintptr_t o = mp->tcache_owner.load(std::memory_order_acquire);
  if (o != 0 && o != ((uintptr_t)gp | 1)) {
    gp->alloc_m = prev;
    return {nullptr, nullptr, kMallocxTcacheNone};
  }
  mp->tcache_owner.store((uintptr_t)gp, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return {mp, prev, mallocx_tcache(ind)};
}

inline void alloc_leave(AllocCtx c) {
  if (c.m) {
    c.m->tcache_owner.store(0, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    tls_g->alloc_m = c.prev;
  }
}

// The scheduler, as gp leaves its M (parks, yields, is preempted): a cache
// gp is claiming stays gp's (see above).
inline void mcache_lend(G* gp) {
  M* am = gp->alloc_m;
  if (__builtin_expect(am != nullptr, 0) &&
      am->tcache_owner.load(std::memory_order_relaxed) == 0)
    am->tcache_owner.store((uintptr_t)gp | 1, std::memory_order_relaxed);
}

}  // namespace goshim
