// Allocation caches per M (see mcache.hpp).
#include "core/mcache.hpp"

#include <stddef.h>
#include <sys/types.h>

#include "core/contract.hpp"
#include "core/jemalloc_glue.hpp"
#include "core/scstore.hpp"
#include "syscalls/sys.hpp"

// jemalloc's (weak: the unit tests link core/ without jemalloc, and then
// there is no cache to make).
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));
extern "C" void* mallocx(size_t size, int flags) __attribute__((weak));
extern "C" void dallocx(void* p, int flags) __attribute__((weak));

namespace goshim {

__thread bool tls_thread_cache_on __attribute__((tls_model("initial-exec"))) = false;
__thread bool tls_alloc_arena0 __attribute__((tls_model("initial-exec"))) = false;

int runtime_thread_alloc_flags = kMallocxTcacheNone;

void mcache_runtime_arena_init() {
  if (!mallctl) return;
  unsigned ind = 0;
  size_t len = sizeof ind;
  if (mallctl("arenas.create", &ind, &len, nullptr, 0) != 0) return;
  // jemalloc's MALLOCX_ARENA(ind), with no cache.
  runtime_thread_alloc_flags = (int)((ind + 1) << 20) | kMallocxTcacheNone;
}

void mcache_runtime_thread_start() {
  // Sets up this thread's allocator state now (its one visit to a lock
  // every thread takes), from the runtime's own arena.
  if (!mallocx || !dallocx) return;
  if (void* p = mallocx(1, runtime_thread_alloc_flags)) dallocx(p, kMallocxTcacheNone);
}

int mcache_create(M* mp) {
  int32_t cur = mp->tcache.load(std::memory_order_acquire);
  if (cur != -1) return cur >= 0 ? cur : -1;
  // Inside jemalloc, holding one of its locks (an allocation glibc makes
  // for it, e.g. pthread_create's DTV): no mallctl now (it may take that
  // lock, jemalloc_glue.hpp); this allocation goes without a cache, and a
  // later one makes it.
  if (!mallctl || tls_je_locks_held != 0) return -1;
  unsigned ind = 0;
  size_t len = sizeof ind;
  // jemalloc has a fixed number of explicit caches (4095): past them, the
  // M's goroutines allocate without one.
  int32_t want = mallctl("tcache.create", &ind, &len, nullptr, 0) == 0 ? (int32_t)ind : -2;
  // Normally the M's own thread; a goroutine that went on elsewhere in the
  // middle of its allocation may race it: one of the two caches goes.
  if (!mp->tcache.compare_exchange_strong(cur, want, std::memory_order_acq_rel)) {
    if (want >= 0) mallctl("tcache.destroy", nullptr, nullptr, &ind, sizeof ind);
    return cur >= 0 ? cur : -1;
  }
  return want >= 0 ? want : -1;
}

void mcache_destroy(M* mp) {
  int32_t ind = mp->tcache.load(std::memory_order_acquire);
  // An M that never had a cache gets none from now on either: glibc's
  // start_thread frees other threads' cached stacks' DTVs after the key
  // destructors ran (and so after jemalloc's thread state was cleaned up),
  // and such a free on this M made its cache there (mcache_create:
  // tcache.create, a full jemalloc thread state, linked into jemalloc's
  // list of threads) that nothing removed: once glibc unmapped the stack,
  // the next thread to link itself into that list wrote into it
  // (m_retire_malloc died of SIGSEGV in tsd_add_nominal 1 run in about 150
  // at GOSHIM_MAXPROCS=1). With -2 the free goes without a cache, and
  // jemalloc sets up only a minimal thread state, on no list.
  if (ind == -1 && mp->tcache.compare_exchange_strong(ind, -2, std::memory_order_acq_rel)) return;
  if (ind < 0 || !mallctl) return;
  // Lent to a goroutine that went on elsewhere mid-allocation: leave it.
  if (mp->tcache_owner.load(std::memory_order_acquire) != 0) return;
  mp->tcache.store(-2, std::memory_order_release);
  unsigned u = (unsigned)ind;
  mallctl("tcache.destroy", nullptr, nullptr, &u, sizeof u);
}

namespace {
constexpr int64_t kPurgePeriodNs = 1000 * 1000 * 1000;
std::atomic<int64_t> purge_next{0};   // nanotime of the next ask
std::atomic<int64_t> purge_until{0};  // asks stop then: nothing freed before is left
std::atomic<int64_t> purge_window{-2};  // dirty_decay_ms + 2 s in ns; -1: never; -2: unread
}  // namespace

int64_t mcache_idle_purge(bool active) {
  GOSHIM_ON_G0();
  GOSHIM_WITHOUT_P();
  GOSHIM_NO_LOCKS("mcache_idle_purge");
  if (!mallctl) return 0;
  int64_t win = purge_window.load(std::memory_order_relaxed);
  if (win == -2) {
    ssize_t ms = -1;
    size_t len = sizeof ms;
    bool bg = false;
    size_t blen = sizeof bg;
    // jemalloc's background threads (MALLOC_CONF=background_thread:true)
    // purge by themselves, and then it ignores this.
    if (mallctl("arenas.dirty_decay_ms", &ms, &len, nullptr, 0) != 0 || ms < 0 ||
        (mallctl("background_thread", &bg, &blen, nullptr, 0) == 0 && bg))
      win = -1;
    else
      win = (int64_t)ms * 1000 * 1000 + 2 * kPurgePeriodNs;
    purge_window.store(win, std::memory_order_relaxed);
  }
  if (win < 0) return 0;
  int64_t now = sys::nanotime();
  int64_t until = purge_until.load(std::memory_order_relaxed);
  // Goroutines ran since this M last looked: what they freed is all
  // returned by a decay period from now. (Moved only by a whole period or
  // more: Ms that go idle thousands of times a second, as in a ping-pong,
  // then share this word read-only; the window has 2 s of slack.)
  while (active && until < now + win - kPurgePeriodNs &&
         !purge_until.compare_exchange_weak(until, now + win, std::memory_order_relaxed)) {
  }
  if (active && until < now + win - kPurgePeriodNs) until = now + win;
  if (now >= until) return 0;
  int64_t next = purge_next.load(std::memory_order_relaxed);
  if (now < next || !purge_next.compare_exchange_strong(next, now + kPurgePeriodNs,
                                                        std::memory_order_relaxed)) {
    // Another M asks, or asked less than a period ago.
    return purge_next.load(std::memory_order_relaxed);
  }
  // Every arena (4096: MALLCTL_ARENAS_ALL): purge what the decay curve
  // says is due now. (No statistics: refreshing them walks every thread
  // cache of every arena.)
  mallctl("arena.4096.decay", nullptr, nullptr, nullptr, 0);
  return now + kPurgePeriodNs;
}

bool mcache_purge_due() {
  return mallctl && sys::nanotime() >= purge_next.load(std::memory_order_relaxed);
}

namespace {
// jemalloc's counters of this thread's allocated and freed bytes (in its
// thread state: valid for the thread's life), looked up once; null when
// this jemalloc keeps none (built without statistics: then every sleep
// gives the cache back).
__thread const uint64_t* tls_je_allocated __attribute__((tls_model("initial-exec")));
__thread const uint64_t* tls_je_deallocated __attribute__((tls_model("initial-exec")));
__thread bool tls_je_counters_read __attribute__((tls_model("initial-exec")));
// The traffic when the cache was last turned on.
__thread uint64_t tls_cache_traffic_mark __attribute__((tls_model("initial-exec")));
// Whether the cache was given back, and the allocations made since (see
// kThreadCacheReenableAllocs). (goshim's TLS is zero-initialized.)
__thread bool tls_cache_released __attribute__((tls_model("initial-exec")));
__thread int tls_uncached_allocs __attribute__((tls_model("initial-exec")));
// The thread's exit has begun (thread_cache_exiting): its cache stays as it is.
__thread bool tls_cache_final __attribute__((tls_model("initial-exec")));
// Give the cache back only after a sleep of kThreadCacheDeferNs (see there).
__thread bool tls_cache_defer __attribute__((tls_model("initial-exec")));

uint64_t thread_traffic() {
  if (!tls_je_counters_read) {
    tls_je_counters_read = true;
    uint64_t *a = nullptr, *d = nullptr;
    size_t la = sizeof a, ld = sizeof d;
    if (mallctl("thread.allocatedp", &a, &la, nullptr, 0) == 0 &&
        mallctl("thread.deallocatedp", &d, &ld, nullptr, 0) == 0 && a && d) {
      tls_je_allocated = a;
      tls_je_deallocated = d;
    }
  }
  if (!tls_je_allocated) return 0;
  return __atomic_load_n(tls_je_allocated, __ATOMIC_RELAXED) +
         __atomic_load_n(tls_je_deallocated, __ATOMIC_RELAXED);
}
}  // namespace

namespace {
// Arenas whose purge an exiting thread asked for (bit i: arena i; bit 63:
// every arena), and whether a thread is purging them. jemalloc skips a
// purge of an arena while another purge of it is under way (which took
// the arena's dirty extents before this thread freed its own): 4 threads
// of one arena that exited together left 3 of their memory resident about
// 1 run in 10 (dbmem_idle_return, mode o1). So one thread purges at a
// time, and goes on for as long as others ask meanwhile.
std::atomic<uint64_t> exit_purge_pending{0};
std::atomic<bool> exit_purge_busy{false};

void purge_arena(unsigned ind) {
  char name[32] = "arena.";
  char digits[12];
  int nd = 0;
  do {
    digits[nd++] = (char)('0' + ind % 10);
    ind /= 10;
  } while (ind != 0);
  size_t at = 6;
  while (nd > 0) name[at++] = digits[--nd];
  for (const char* t = ".purge"; *t; t++) name[at++] = *t;
  name[at] = 0;
  mallctl(name, nullptr, nullptr, nullptr, 0);
}

void exit_purge(unsigned ind) {
  exit_purge_pending.fetch_or(ind < 63 ? uint64_t{1} << ind : uint64_t{1} << 63);
  for (;;) {
    bool idle = false;
    if (!exit_purge_busy.compare_exchange_strong(idle, true)) return;  // the purger sees the bit
    for (uint64_t m; (m = exit_purge_pending.exchange(0)) != 0;) {
      if (m >> 63) {
        purge_arena(4096);  // MALLCTL_ARENAS_ALL
        continue;
      }
      for (unsigned i = 0; i < 63; i++)
        if (m >> i & 1) purge_arena(i);
    }
    sc_store(exit_purge_busy, false);
    // A bit set after the last exchange by a thread that found this one
    // busy: purge it too.
    if (exit_purge_pending.load() == 0) return;
  }
}
}  // namespace

void thread_cache_exiting() {
  if (tls_g != nullptr || tls_cache_final) return;
  tls_cache_final = true;
  // A cache given back at a sleep is turned on again now, before any key
  // destructor (jemalloc's among them) runs: the thread ends with its
  // cache, as it would natively, and jemalloc's destructor destroys it,
  // which is where jemalloc purges the thread's arena when the thread was
  // the last one on it (its dirty pages go back at once). A thread that
  // ended with its cache off purged nothing, and nothing else asks jemalloc
  // to decay in 1:1 mode: 32 threads that waited at a barrier and then
  // freed 64 MiB and exited left every page resident (dbmem_idle_return
  // and dbmem_idle_return_wait, mode o1).
  // Whether the thread ever allocated (its cache was turned on): one that
  // only freed has a minimal jemalloc thread state, left as it is.
  bool allocated = tls_thread_cache_on || tls_cache_released;
  if (tls_cache_released && !tls_thread_cache_on && mallctl) {
    bool on = true;
    mallctl("thread.tcache.enabled", nullptr, nullptr, &on, sizeof on);
    tls_cache_released = false;
  }
  tls_thread_cache_on = true;  // alloc_enter turns nothing on (it may be off)
  // jemalloc purges an arena at a thread's end only when no thread is left
  // on it; the thread's arena is often shared with a thread that lives on
  // (the main thread), and in 1:1 mode nothing else asks it to decay
  // (mcache_idle_purge runs on idle Ms): the pages the thread freed stayed
  // resident for good (dbmem_idle_return in mode o1: the 4 threads of 32
  // that shared the main thread's arena, 2,048 pages of 16,384, sometimes
  // 2,049, past its ceiling). glibc returns such memory at free. So a
  // thread that freed kThreadExitPurgeBytes or more purges its arena now
  // (after its frees, before its key destructors: this thread's arena is
  // still bound).
  if (!mallctl || !allocated) return;
  thread_traffic();  // looks jemalloc's counters up
  if (tls_je_deallocated &&
      __atomic_load_n(tls_je_deallocated, __ATOMIC_RELAXED) < kThreadExitPurgeBytes)
    return;
  unsigned ind = 0;
  size_t len = sizeof ind;
  if (mallctl("thread.arena", &ind, &len, nullptr, 0) != 0) return;
  exit_purge(ind);
}

void thread_cache_enable() {
  // Inside jemalloc, holding one of its locks (glibc's pthread_create
  // callocs the DTV of the background thread jemalloc starts, holding
  // background_thread_lock, which mallctl's first call takes): the cache
  // is turned on at a later allocation (jemalloc_glue.hpp).
  if (tls_je_locks_held != 0) return;
  if (tls_cache_released && ++tls_uncached_allocs < kThreadCacheReenableAllocs) return;
  tls_cache_released = false;
  tls_thread_cache_on = true;
  if (!mallctl) return;
  bool on = true;
  mallctl("thread.tcache.enabled", nullptr, nullptr, &on, sizeof on);
  tls_cache_traffic_mark = thread_traffic();
}

void thread_cache_release_now() {
  if (!mallctl || tls_cache_final || !tls_thread_cache_on) return;
  tls_thread_cache_on = false;
  tls_cache_released = true;
  tls_uncached_allocs = 0;
  bool off = false;
  mallctl("thread.tcache.enabled", nullptr, nullptr, &off, sizeof off);
}

CacheIdle thread_cache_idle_slow() {
  if (!mallctl || tls_cache_final) return CacheIdle::None;
  uint64_t t = thread_traffic();
  if (tls_je_allocated && t - tls_cache_traffic_mark < kThreadCacheReleaseBytes)
    return CacheIdle::None;
  if (tls_cache_defer) return CacheIdle::Deferred;
  thread_cache_release_now();
  return CacheIdle::Released;
}

void thread_cache_slept(int64_t slept_ns) {
  if (slept_ns < kThreadCacheDeferNs) tls_cache_defer = true;
}

}  // namespace goshim
