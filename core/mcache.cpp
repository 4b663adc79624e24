// Allocation caches per M (see mcache.hpp).
#include "core/mcache.hpp"

#include <stddef.h>

// jemalloc's (weak: the unit tests link core/ without jemalloc, and then
// there is no cache to make).
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace goshim {

__thread bool tls_thread_cache_on __attribute__((tls_model("initial-exec"))) = false;

int mcache_create(M* mp) {
  int32_t cur = mp->tcache.load(std::memory_order_acquire);
  if (cur != -1) return cur >= 0 ? cur : -1;
  if (!mallctl) return -1;
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
  if (ind < 0 || !mallctl) return;
  // Lent to a goroutine that went on elsewhere mid-allocation: leave it.
  if (mp->tcache_owner.load(std::memory_order_acquire) != 0) return;
  mp->tcache.store(-2, std::memory_order_release);
  unsigned u = (unsigned)ind;
  mallctl("tcache.destroy", nullptr, nullptr, &u, sizeof u);
}

void thread_cache_enable() {
  tls_thread_cache_on = true;
  if (!mallctl) return;
  bool on = true;
  mallctl("thread.tcache.enabled", nullptr, nullptr, &on, sizeof on);
}

}  // namespace goshim
