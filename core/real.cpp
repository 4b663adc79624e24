// Resolution of the real interposed functions (see real.hpp).
#include "core/real.hpp"

#include <dlfcn.h>

#include <atomic>

#include "core/rawlog.hpp"
#include "core/real_io.hpp"

namespace goshim::real {

#define GOSHIM_REAL_DEF(ret, name, args) ret(*name) args = nullptr;
GOSHIM_REAL_FUNCS(GOSHIM_REAL_DEF)
#undef GOSHIM_REAL_DEF

static std::atomic<bool> in_resolve{false};
bool resolving() { return in_resolve.load(std::memory_order_acquire); }

void resolve() {
  in_resolve.store(true, std::memory_order_release);
#define GOSHIM_REAL_RESOLVE(ret, name, args)                   \
  if (!name) {                                                 \
    void* p = dlsym(RTLD_NEXT, #name);                         \
    __atomic_store_n(&name, (ret(*) args)p, __ATOMIC_RELEASE); \
  }
  GOSHIM_REAL_FUNCS(GOSHIM_REAL_RESOLVE)
#undef GOSHIM_REAL_RESOLVE
  resolve_io();  // the fd layer's (core/real_io.hpp)
  in_resolve.store(false, std::memory_order_release);
  if (!pthread_create || !pthread_join || !pthread_exit)
    fatal("cannot resolve libc's pthread functions (is goshim preloaded into a glibc program?)");
}

}  // namespace goshim::real
