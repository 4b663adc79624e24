// x86-64: thread pointer access and context frames (see switch.S for the
// frame layout). The aarch64 twin lives in arch/aarch64/ (not yet written:
// see arch/aarch64/README).
#pragma once

#include <stdint.h>

extern "C" {
// Non-zero when wrfsbase may be used (AT_HWCAP2 has HWCAP2_FSGSBASE).
extern unsigned char goshim_arch_fsgsbase;

struct GoshimG;  // opaque to the assembly: only offset 0 (sched_sp) is used
void goshim_mcall(void* gp, void (*fn)(void*), uintptr_t g0_sp, uintptr_t g0_tp);
[[noreturn]] void goshim_gogo(uintptr_t sp, uintptr_t tp);
void goshim_switch(void* from, uintptr_t to_sp, uintptr_t to_tp, void (*post)(void*));
void goshim_gstart();
void goshim_restore_rt();  // rt_sigreturn trampoline for raw rt_sigaction
}

namespace goshim::arch {

inline constexpr int kFrameSize = 0x40;  // saved frame incl. return address
inline constexpr uint32_t kDefaultMxcsr = 0x1f80;
inline constexpr uint16_t kDefaultFpcw = 0x037f;

// The current thread pointer (the TCB's self pointer at %fs:0). Signal-safe.
inline uintptr_t get_tp() {
  uintptr_t tp;
  __asm__ volatile("movq %%fs:0, %0" : "=r"(tp));
  return tp;
}

// A full barrier (StoreLoad included), cheaper than mfence: a locked
// no-op on the stack, as Linux's smp_mb() on x86-64.
inline void full_barrier() { __asm__ volatile("lock orq $0, (%%rsp)" ::: "memory", "cc"); }

// Current stack pointer.
inline uintptr_t get_sp() {
  uintptr_t sp;
  __asm__ volatile("movq %%rsp, %0" : "=r"(sp));
  return sp;
}

inline uint32_t get_mxcsr() {
  uint32_t v;
  __asm__ volatile("stmxcsr %0" : "=m"(v));
  return v;
}

inline uint16_t get_fpcw() {
  uint16_t v;
  __asm__ volatile("fnstcw %0" : "=m"(v));
  return v;
}

// Installs tp as this kernel thread's thread pointer.
void set_tp(uintptr_t tp);

// Detects FSGSBASE. Called once at init, before any switch.
void init();

// Builds the first frame of a new G at the top of [.., stack_top): the G
// starts in entry(arg) with the given floating-point control state.
// Returns the initial sched_sp.
uintptr_t frame_init(uintptr_t stack_top, void (*entry)(void*), void* arg, uint32_t mxcsr,
                     uint16_t fpcw);

// Reads the return address and frame pointer of a saved frame (for
// backtraces of parked Gs).
inline uintptr_t frame_pc(uintptr_t sp) { return *(uintptr_t*)(sp + 0x38); }
inline uintptr_t frame_fp(uintptr_t sp) { return *(uintptr_t*)(sp + 0x30); }
inline uintptr_t frame_caller_sp(uintptr_t sp) { return sp + 0x40; }

}  // namespace goshim::arch
