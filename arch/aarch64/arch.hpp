// aarch64: thread pointer access, context frames (see switch.S for the
// frame layout) and signal-context accessors. The x86-64 twin is
// arch/x86_64/arch.hpp; both provide the same names.
#pragma once

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

extern "C" {
struct GoshimG;  // opaque to the assembly: only offset 0 (sched_sp) is used
void goshim_mcall(void* gp, void (*fn)(void*), uintptr_t g0_sp, uintptr_t g0_tp);
[[noreturn]] void goshim_gogo(uintptr_t sp, uintptr_t tp);
void goshim_switch(void* from, uintptr_t to_sp, uintptr_t to_tp, void (*post)(void*));
void goshim_gstart();
// fn(arg) with the stack pointer at sp (16-byte aligned down); returns here.
void goshim_call_on_stack(void* arg, void (*fn)(void*), uintptr_t sp);
void goshim_restore_rt();  // rt_sigreturn trampoline for raw rt_sigaction
}
// Never called on aarch64 (arch::kSigframeMove is false).
[[noreturn]] inline void goshim_sigframe_enter(uintptr_t, int, void*, void*,
                                               void (*)(int, siginfo_t*, void*)) {
  __builtin_trap();
}

namespace goshim::arch {

// TLS variant I (TLS.md, "aarch64"): the thread pointer points at a
// 16-byte tcbhead {dtv, private}; struct pthread lies just below it and
// the static TLS blocks above tp + 16.
inline constexpr bool kTlsVariantI = true;

inline constexpr int kFrameSize = 0xb0;  // saved frame incl. x29/x30

// The floating-point control state a new G starts with: FPCR.
struct FpCtl {
  uint64_t fpcr;
};
inline FpCtl get_fpctl() {
  uint64_t v;
  __asm__ volatile("mrs %0, fpcr" : "=r"(v));
  return FpCtl{v};
}

// The current thread pointer (TPIDR_EL0). Signal-safe.
inline uintptr_t get_tp() {
  uintptr_t tp;
  __asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
  return tp;
}

// Installs tp as this kernel thread's thread pointer (unprivileged).
inline void set_tp(uintptr_t tp) { __asm__ volatile("msr tpidr_el0, %0" ::"r"(tp) : "memory"); }

// A full barrier (StoreLoad included).
inline void full_barrier() { __asm__ volatile("dmb ish" ::: "memory"); }

// The spin-wait hint (x86's pause).
inline void cpu_relax() { __asm__ volatile("yield" ::: "memory"); }

// The smallest guard below a goroutine stack that has one (core/stack.cpp):
// a signal frame (with the FP/SIMD record) is larger than a 4 KiB page.
inline constexpr unsigned long kMinStackGuard = 64 * 1024;

// glibc's own PTHREAD_STACK_MIN for this architecture (128 KiB; not the
// dynamic one of <pthread.h>): what a thread's end keeps of its stack below
// the exiting frame (core/stack.cpp stack_release_unused).
inline constexpr unsigned long kGlibcStackMin = 128 * 1024;

// Current stack pointer.
inline uintptr_t get_sp() {
  uintptr_t sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  return sp;
}

// Nothing to detect. Called once at init, before any switch.
inline void init() {}

// Builds the first frame of a new G at the top of [.., stack_top): the G
// starts in entry(arg) with the given floating-point control state.
// Returns the initial sched_sp.
uintptr_t frame_init(uintptr_t stack_top, void (*entry)(void*), void* arg, FpCtl fp);

// Reads the resume address and frame pointer of a saved frame (for
// backtraces of parked Gs).
inline uintptr_t frame_pc(uintptr_t sp) { return *(uintptr_t*)(sp + 0xa8); }
inline uintptr_t frame_fp(uintptr_t sp) { return *(uintptr_t*)(sp + 0xa0); }
inline uintptr_t frame_caller_sp(uintptr_t sp) { return sp + kFrameSize; }

// Signal context (ucontext_t) accessors. Signal-safe.
inline uintptr_t uc_pc(const ucontext_t* uc) { return (uintptr_t)uc->uc_mcontext.pc; }
inline uintptr_t uc_sp(const ucontext_t* uc) { return (uintptr_t)uc->uc_mcontext.sp; }
inline void uc_set_pc(ucontext_t* uc, uintptr_t pc) { uc->uc_mcontext.pc = pc; }
inline void uc_set_sp(ucontext_t* uc, uintptr_t sp) { uc->uc_mcontext.sp = sp; }
inline void uc_set_fp(ucontext_t* uc, uintptr_t fp) { uc->uc_mcontext.regs[29] = fp; }
// The system call result register (x0).
inline void uc_set_ret(ucontext_t* uc, long v) { uc->uc_mcontext.regs[0] = (unsigned long)v; }
// The callee-saved registers, sp and pc of a context saved by switch.S at
// sp (for unwinding a parked G); uc must be zeroed.
inline void uc_from_frame(ucontext_t* uc, uintptr_t sp) {
  const uint64_t* f = (const uint64_t*)sp;
  for (int i = 0; i < 12; i++) uc->uc_mcontext.regs[19 + i] = f[10 + i];  // x19..x30
  uc->uc_mcontext.pc = f[21];                                              // x30
  uc->uc_mcontext.sp = sp + kFrameSize;
}

// ---- Signal frames (core/signal.cpp, "The M's signal stack").
//
// Not moved on aarch64: its frame (siginfo, ucontext with the __reserved
// records: fpsimd, esr, sve, za, and an extra_context whose datap points
// right past the frame) is not copied elsewhere by goshim yet, so an M has
// no signal stack of its own here and a G without a sigaltstack takes
// goshim's preemption signal on its own stack, as before (LD_PRELOAD.md
// 7.7). These stubs are never called (kSigframeMove guards every use).
inline constexpr bool kSigframeMove = false;
inline constexpr size_t kRedZone = 0;
inline bool sigframe_is_kernel(const siginfo_t*, const ucontext_t*) { return false; }
inline uintptr_t sigframe_copy_lo(const ucontext_t*, uintptr_t top) { return top; }
inline uintptr_t sigframe_copy(const siginfo_t*, const ucontext_t*, uintptr_t top, siginfo_t**,
                               ucontext_t**) {
  __builtin_trap();
  return top;
}

}  // namespace goshim::arch

