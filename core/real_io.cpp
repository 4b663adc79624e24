// Resolution of the real fd-layer functions (see real_io.hpp).
#include "core/real_io.hpp"

#include <dlfcn.h>

namespace goshim::real {

#define GOSHIM_REAL_DEF(ret, name, args) ret(*name) args = nullptr;
GOSHIM_REAL_IO_FUNCS(GOSHIM_REAL_DEF)
#undef GOSHIM_REAL_DEF

void resolve_io() {
#define GOSHIM_REAL_RESOLVE(ret, name, args)                   \
  if (!name) {                                                 \
    void* p = dlsym(RTLD_NEXT, #name);                         \
    __atomic_store_n(&name, (ret(*) args)p, __ATOMIC_RELEASE); \
  }
  GOSHIM_REAL_IO_FUNCS(GOSHIM_REAL_RESOLVE)
#undef GOSHIM_REAL_RESOLVE
}

}  // namespace goshim::real
