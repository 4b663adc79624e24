// x86-64: thread pointer access and context frames (see switch.S for the
// frame layout) and signal-context accessors. The aarch64 twin is
// arch/aarch64/arch.hpp; both provide the same names.
#pragma once

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

extern "C" {
// Non-zero when wrfsbase may be used (AT_HWCAP2 has HWCAP2_FSGSBASE).
extern unsigned char goshim_arch_fsgsbase;

struct GoshimG;  // opaque to the assembly: only offset 0 (sched_sp) is used
void goshim_mcall(void* gp, void (*fn)(void*), uintptr_t g0_sp, uintptr_t g0_tp);
[[noreturn]] void goshim_gogo(uintptr_t sp, uintptr_t tp);
void goshim_switch(void* from, uintptr_t to_sp, uintptr_t to_tp, void (*post)(void*));
void goshim_gstart();
// fn(arg) with the stack pointer at sp (16-byte aligned down); returns here.
void goshim_call_on_stack(void* arg, void (*fn)(void*), uintptr_t sp);
void goshim_restore_rt();  // rt_sigreturn trampoline for raw rt_sigaction
// Enters fn(sig, si, uc) as the kernel enters a signal handler, with the
// stack pointer at sp (a signal frame made by arch::sigframe_copy, its
// restorer's address at sp): fn's return is the frame's rt_sigreturn. Never
// returns here.
[[noreturn]] void goshim_sigframe_enter(uintptr_t sp, int sig, void* si, void* uc,
                                        void (*fn)(int, siginfo_t*, void*));
// Enters the C library's _setjmp(buf) as if its caller had called it,
// after storing in *sp the stack pointer _setjmp records (core/jmpbuf.cpp).
void goshim_jmpbuf_probe(void* buf, uintptr_t* sp);
// Labels inside goshim_mcall, goshim_gogo and goshim_switch (switch.S)
// around the instructions between their move of the stack pointer and
// their move of the thread pointer (pc_mid_switch).
extern const char goshim_mcall_mid[], goshim_mcall_mid_end[], goshim_gogo_mid_end[];
extern const char goshim_switch_mid[], goshim_switch_mid_end[];
}

namespace goshim::arch {

// Whether pc lies inside a context switch where the stack pointer and the
// thread pointer belong to different contexts: goshim_mcall on g0's stack
// with the G's TLS, goshim_gogo with the G's TLS still on g0's stack,
// goshim_switch on the new G's stack with the old G's TLS. A signal taken
// there finds tls_g naming a G whose stack is not the one in use.
inline bool pc_mid_switch(uintptr_t pc) {
  auto in = [pc](const void* lo, const void* hi) { return pc >= (uintptr_t)lo && pc < (uintptr_t)hi; };
  return in(goshim_mcall_mid, goshim_mcall_mid_end) || in((const void*)goshim_gogo, goshim_gogo_mid_end) ||
         in(goshim_switch_mid, goshim_switch_mid_end);
}

// TLS variant II: the thread pointer is the TCB (struct pthread), the
// static TLS blocks lie below it.
inline constexpr bool kTlsVariantI = false;

inline constexpr int kFrameSize = 0x40;  // saved frame incl. return address
inline constexpr uint32_t kDefaultMxcsr = 0x1f80;
inline constexpr uint16_t kDefaultFpcw = 0x037f;

// The floating-point control state a new G starts with.
struct FpCtl {
  uint32_t mxcsr;
  uint16_t fpcw;
};

// The current thread pointer (the TCB's self pointer at %fs:0). Signal-safe.
inline uintptr_t get_tp() {
  uintptr_t tp;
  __asm__ volatile("movq %%fs:0, %0" : "=r"(tp));
  return tp;
}

// A full barrier (StoreLoad included), cheaper than mfence: a locked
// no-op on the stack, as Linux's smp_mb() on x86-64.
inline void full_barrier() { __asm__ volatile("lock orq $0, (%%rsp)" ::: "memory", "cc"); }

// The smallest guard below a goroutine stack that has one (core/stack.cpp):
// the guard the program asks for, unchanged.
inline constexpr unsigned long kMinStackGuard = 0;

// glibc's own PTHREAD_STACK_MIN for this architecture (16 KiB; not the
// dynamic one of <pthread.h>): what a thread's end keeps of its stack below
// the exiting frame (core/stack.cpp stack_release_unused).
inline constexpr unsigned long kGlibcStackMin = 16 * 1024;

// glibc's jmp_buf (glibc-private; core/jmpbuf.cpp checks both facts at
// start-up with goshim_jmpbuf_probe): the index of the word that holds the
// stack pointer, and its mangling (xor with the pointer guard, then rotate
// left by 17 bits). jmpbuf_unmangle(w, key) undoes it for the pointer
// guard key; jmpbuf_unmangle(w, sp) of a word that holds the mangled sp
// gives the key.
inline constexpr int kJmpBufSp = 6;
inline uintptr_t jmpbuf_unmangle(uintptr_t w, uintptr_t key) { return ((w >> 17) | (w << 47)) ^ key; }

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

inline FpCtl get_fpctl() { return FpCtl{get_mxcsr(), get_fpcw()}; }

// The spin-wait hint.
inline void cpu_relax() { __builtin_ia32_pause(); }

// Installs tp as this kernel thread's thread pointer.
void set_tp(uintptr_t tp);

// Detects FSGSBASE. Called once at init, before any switch.
void init();

// Builds the first frame of a new G at the top of [.., stack_top): the G
// starts in entry(arg) with the given floating-point control state.
// Returns the initial sched_sp.
uintptr_t frame_init(uintptr_t stack_top, void (*entry)(void*), void* arg, FpCtl fp);

// Reads the return address and frame pointer of a saved frame (for
// backtraces of parked Gs).
inline uintptr_t frame_pc(uintptr_t sp) { return *(uintptr_t*)(sp + 0x38); }
inline uintptr_t frame_fp(uintptr_t sp) { return *(uintptr_t*)(sp + 0x30); }
inline uintptr_t frame_caller_sp(uintptr_t sp) { return sp + 0x40; }

// Signal context (ucontext_t) accessors. Signal-safe.
inline uintptr_t uc_pc(const ucontext_t* uc) { return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP]; }
inline uintptr_t uc_sp(const ucontext_t* uc) { return (uintptr_t)uc->uc_mcontext.gregs[REG_RSP]; }
inline void uc_set_pc(ucontext_t* uc, uintptr_t pc) { uc->uc_mcontext.gregs[REG_RIP] = (greg_t)pc; }
inline void uc_set_sp(ucontext_t* uc, uintptr_t sp) { uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp; }
inline void uc_set_fp(ucontext_t* uc, uintptr_t fp) { uc->uc_mcontext.gregs[REG_RBP] = (greg_t)fp; }
// The system call result register (rax).
inline void uc_set_ret(ucontext_t* uc, long v) { uc->uc_mcontext.gregs[REG_RAX] = (greg_t)v; }
// The callee-saved registers, sp and pc of a context saved by switch.S at
// sp (for unwinding a parked G); uc must be zeroed.
inline void uc_from_frame(ucontext_t* uc, uintptr_t sp) {
  const uintptr_t* f = (const uintptr_t*)sp;
  uc->uc_mcontext.gregs[REG_R15] = (greg_t)f[1];
  uc->uc_mcontext.gregs[REG_R14] = (greg_t)f[2];
  uc->uc_mcontext.gregs[REG_R13] = (greg_t)f[3];
  uc->uc_mcontext.gregs[REG_R12] = (greg_t)f[4];
  uc->uc_mcontext.gregs[REG_RBX] = (greg_t)f[5];
  uc->uc_mcontext.gregs[REG_RBP] = (greg_t)f[6];
  uc->uc_mcontext.gregs[REG_RIP] = (greg_t)f[7];
  uc->uc_mcontext.gregs[REG_RSP] = (greg_t)(sp + 0x40);
}

// ---- Signal frames (core/signal.cpp, "The M's signal stack").
//
// A handler's frame can be moved: the kernel's x86-64 rt_sigframe is the
// restorer's address, the kernel's ucontext (304 bytes: flags, link, stack,
// the 256-byte sigcontext, an 8-byte mask) and the siginfo (128 bytes)
// right after it, with the xsave area (uc_mcontext.fpregs, 64-byte
// aligned, its size in the software-reserved bytes of its fxsave part)
// above. A copy elsewhere is a frame rt_sigreturn accepts once fpregs
// points at the copied xsave area; nothing else in it points into it.
inline constexpr bool kSigframeMove = true;
// The bytes below the stack pointer a signal frame never overwrites.
inline constexpr size_t kRedZone = 128;
inline constexpr size_t kKernelUcSize = 304;
inline constexpr size_t kSigframeHead = 8 + kKernelUcSize + 128;  // restorer, uc, siginfo

// The size of uc's xsave area (0 without one). Signal-safe.
inline size_t sigframe_fpsize(const ucontext_t* uc) {
  const unsigned char* fp = (const unsigned char*)uc->uc_mcontext.fpregs;
  if (!fp) return 0;
  uint32_t magic1, ext;
  __builtin_memcpy(&magic1, fp + 464, 4);  // fxsave's sw_reserved: struct _fpx_sw_bytes
  __builtin_memcpy(&ext, fp + 468, 4);
  if (magic1 == 0x46505853u && ext >= 512 && ext <= (1u << 20)) return ext;  // FP_XSTATE_MAGIC1
  return 512;
}

// Whether (si, uc) are laid out as the kernel's frame (the handler's own
// arguments, not a context of goshim's making).
inline bool sigframe_is_kernel(const siginfo_t* si, const ucontext_t* uc) {
  return (const char*)si == (const char*)uc + kKernelUcSize;
}

// The lowest address a copy of the frame of (si, uc) below top takes.
inline uintptr_t sigframe_copy_lo(const ucontext_t* uc, uintptr_t top) {
  uintptr_t fp = (top - sigframe_fpsize(uc)) & ~(uintptr_t)63;
  return ((fp - kSigframeHead) & ~(uintptr_t)15) - 8;
}

// Copies the frame of (si, uc) (sigframe_is_kernel) below top, as the
// kernel lays one out below a stack pointer (top: that pointer less the
// red zone). Returns the stack pointer to enter the handler with
// (goshim_sigframe_enter); *nsi, *nuc: the copy's siginfo and context.
// Signal-safe.
inline uintptr_t sigframe_copy(const siginfo_t* si, const ucontext_t* uc, uintptr_t top,
                               siginfo_t** nsi, ucontext_t** nuc) {
  (void)si;
  size_t fpsize = sigframe_fpsize(uc);
  uintptr_t fp = (top - fpsize) & ~(uintptr_t)63;
  uintptr_t sp = ((fp - kSigframeHead) & ~(uintptr_t)15) - 8;
  if (fpsize) __builtin_memcpy((void*)fp, (const void*)uc->uc_mcontext.fpregs, fpsize);
  __builtin_memcpy((void*)sp, (const char*)uc - 8, kSigframeHead);
  ucontext_t* u = (ucontext_t*)(sp + 8);
  if (fpsize) u->uc_mcontext.fpregs = (struct _libc_fpstate*)fp;
  *nuc = u;
  *nsi = (siginfo_t*)(sp + 8 + kKernelUcSize);
  return sp;
}

}  // namespace goshim::arch
