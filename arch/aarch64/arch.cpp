// aarch64 frame setup (see switch.S for the layout).
#include "arch/aarch64/arch.hpp"

namespace goshim::arch {

uintptr_t frame_init(uintptr_t stack_top, void (*entry)(void*), void* arg, FpCtl fp) {
  uintptr_t top = stack_top & ~(uintptr_t)15;
  uintptr_t sp = top - kFrameSize;  // entry runs with sp == top (16-aligned)
  uint64_t* f = (uint64_t*)sp;
  for (int i = 0; i < kFrameSize / 8; i++) f[i] = 0;
  f[0] = fp.fpcr;
  f[10] = (uint64_t)entry;           // x19: entry
  f[11] = (uint64_t)arg;             // x20: arg
  f[20] = 0;                         // x29: no parent frame record
  f[21] = (uint64_t)&goshim_gstart;  // x30: resume address
  return sp;
}

}  // namespace goshim::arch
