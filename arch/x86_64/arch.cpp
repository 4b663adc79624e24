// x86-64 thread pointer and frame setup.
#include "arch/x86_64/arch.hpp"

#include <asm/prctl.h>
#include <sys/auxv.h>

#include "syscalls/sys.hpp"

#ifndef HWCAP2_FSGSBASE
#define HWCAP2_FSGSBASE (1 << 1)
#endif

extern "C" {
__attribute__((visibility("hidden"))) unsigned char goshim_arch_fsgsbase = 0;
}

namespace goshim::arch {

void init() {
  goshim_arch_fsgsbase = (getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE) ? 1 : 0;
}

void set_tp(uintptr_t tp) {
  if (goshim_arch_fsgsbase) {
    __asm__ volatile("wrfsbase %0" ::"r"(tp) : "memory");
  } else {
    sys::arch_prctl(ARCH_SET_FS, tp);
  }
}

uintptr_t frame_init(uintptr_t stack_top, void (*entry)(void*), void* arg, FpCtl fp) {
  uintptr_t top = stack_top & ~(uintptr_t)15;
  uintptr_t sp = top - kFrameSize;  // return slot at top-8: entry sees a 16-aligned rsp
  uint64_t* f = (uint64_t*)sp;
  f[0] = (uint64_t)fp.mxcsr | ((uint64_t)fp.fpcw << 32);
  f[1] = 0;                 // r15
  f[2] = 0;                 // r14
  f[3] = (uint64_t)entry;   // r13: entry
  f[4] = (uint64_t)arg;     // r12: arg
  f[5] = 0;                 // rbx
  f[6] = 0;                 // rbp
  f[7] = (uint64_t)&goshim_gstart;
  return sp;
}

}  // namespace goshim::arch
