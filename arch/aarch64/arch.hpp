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
// Enters the C library's _setjmp(buf) as if its caller had called it,
// after storing in *sp the stack pointer _setjmp records (core/jmpbuf.cpp).
void goshim_jmpbuf_probe(void* buf, uintptr_t* sp);
// Labels inside goshim_mcall, goshim_gogo and goshim_switch (switch.S)
// around the instructions between their move of the stack pointer and
// their move of the thread pointer (pc_mid_switch).
extern const char goshim_mcall_mid[], goshim_mcall_mid_end[], goshim_gogo_mid_end[];
extern const char goshim_switch_mid[], goshim_switch_mid_end[];
}
// Enters fn(sig, si, uc) as the kernel enters a signal handler: the stack
// pointer at sp (a signal frame made by arch::sigframe_copy), x29 at fp
// (the frame record above it), x30 at goshim_restore_rt: fn's return is
// the frame's rt_sigreturn. Never returns here. (goshim_sigframe_enter
// below computes fp.)
extern "C" [[noreturn]] void goshim_sigframe_enter_fp(uintptr_t sp, int sig, void* si, void* uc,
                                                      void (*fn)(int, siginfo_t*, void*),
                                                      uintptr_t fp);

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

// glibc's jmp_buf (glibc-private; core/jmpbuf.cpp checks both facts at
// start-up with goshim_jmpbuf_probe): the index of the word that holds the
// stack pointer, and its mangling (xor with the pointer guard).
// jmpbuf_unmangle(w, key) undoes it for the pointer guard key;
// jmpbuf_unmangle(w, sp) of a word that holds the mangled sp gives the key.
inline constexpr int kJmpBufSp = 13;
inline uintptr_t jmpbuf_unmangle(uintptr_t w, uintptr_t key) { return w ^ key; }

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
// A handler's frame can be moved. The kernel's arm64 rt_sigframe is the
// siginfo (128 bytes) and right after it the ucontext (glibc's ucontext_t
// has the kernel's layout: 4560 bytes, uc_mcontext.__reserved 4096 bytes
// at offset 464, 16-byte aligned), the stack pointer at the siginfo. The
// __reserved area holds records, each a header {magic, size} (size
// including the header): fpsimd_context first, then those the CPU and the
// signal call for (esr_context for a fault, sve_context, za, tpidr2, ...:
// qemu-user writes fpsimd and, with SVE, sve_context, never esr), ended
// by a null header. A frame whose records do not fit there has an
// extra_context record whose datap points at the rest, inside the same
// frame past its fixed part (the kernel: right after the rt_sigframe;
// qemu-user: right after the __reserved terminator), size bytes ending at
// or before the frame's end. The frame is rounded up to 16 bytes, and
// above it lies the frame record {x29, x30} of the interrupted code,
// where the handler's x29 points; its x30 is the restorer (rt_sigreturn).
// rt_sigreturn reads the frame at the stack pointer (which must be
// 16-byte aligned) and follows datap: a copy elsewhere is a frame it
// accepts once datap is moved by the same distance; nothing else in it
// points into it. There is no red zone on aarch64.
inline constexpr bool kSigframeMove = true;
inline constexpr size_t kRedZone = 0;
inline constexpr size_t kSiginfoSize = 128;
inline constexpr size_t kSigframeFixed = kSiginfoSize + sizeof(ucontext_t);
inline constexpr uint32_t kExtraMagic = 0x45585401;  // EXTRA_MAGIC
// A bound on a sane frame (the kernel's own, SIGFRAME_MAXSZ, is 256 KiB).
inline constexpr size_t kSigframeMax = 256 * 1024;
static_assert(sizeof(ucontext_t) == 4560, "glibc's aarch64 ucontext_t is the kernel's");
static_assert(offsetof(ucontext_t, uc_mcontext.__reserved) == 464, "the kernel's layout");
static_assert(kSigframeFixed % 16 == 0, "the kernel's layout");

// The size of the kernel's frame of uc (a multiple of 16, the frame record
// above it not counted) and where its extra_context record is (offset from
// the frame's start, 0 without one); 0 when its records are not a frame's
// (bad sizes, no terminator, datap outside the frame). Signal-safe.
inline size_t sigframe_span(const ucontext_t* uc, size_t* extra_off = nullptr) {
  const char* base = (const char*)uc - kSiginfoSize;
  const char* res = (const char*)uc->uc_mcontext.__reserved;
  const size_t lim = sizeof(uc->uc_mcontext.__reserved);
  uintptr_t end = (uintptr_t)base + kSigframeFixed;
  size_t off = 0, xoff = 0;
  for (;;) {
    if (off + 8 > lim) return 0;
    uint32_t magic, size;
    __builtin_memcpy(&magic, res + off, 4);
    __builtin_memcpy(&size, res + off + 4, 4);
    if (magic == 0) {
      if (size != 0) return 0;
      break;
    }
    if (size < 8 || (size & 7) || size > lim - off) return 0;
    if (magic == kExtraMagic) {
      uint64_t datap;
      uint32_t xsize;
      if (xoff || size < 24) return 0;
      __builtin_memcpy(&datap, res + off + 8, 8);
      __builtin_memcpy(&xsize, res + off + 16, 4);
      if ((datap & 15) || datap < (uintptr_t)res || xsize > kSigframeMax ||
          datap + xsize > (uintptr_t)base + kSigframeMax)
        return 0;
      if (datap + xsize > end) end = datap + xsize;
      xoff = (size_t)(res + off - base);
    }
    off += size;
  }
  if (extra_off) *extra_off = xoff;
  return (end - (uintptr_t)base + 15) & ~(size_t)15;
}

// Whether (si, uc) are laid out as the kernel's frame (the handler's own
// arguments, not a context of goshim's making) with records it can move.
inline bool sigframe_is_kernel(const siginfo_t* si, const ucontext_t* uc) {
  return (const char*)si + kSiginfoSize == (const char*)uc && sigframe_span(uc) != 0;
}

// The lowest address a copy of the frame of (si, uc) below top takes.
inline uintptr_t sigframe_copy_lo(const ucontext_t* uc, uintptr_t top) {
  return ((top - 16) & ~(uintptr_t)15) - sigframe_span(uc);
}

// Copies the frame of (si, uc) (sigframe_is_kernel) below top, as the
// kernel lays one out below a stack pointer (top): the frame record of the
// interrupted x29/x30, the frame below it, its extra_context's datap
// moved with it. Returns the stack pointer to enter the handler with
// (goshim_sigframe_enter); *nsi, *nuc: the copy's siginfo and context.
// Signal-safe.
inline uintptr_t sigframe_copy(const siginfo_t* si, const ucontext_t* uc, uintptr_t top,
                               siginfo_t** nsi, ucontext_t** nuc) {
  size_t xoff = 0;
  size_t span = sigframe_span(uc, &xoff);
  uintptr_t rec = (top - 16) & ~(uintptr_t)15;
  uintptr_t sp = rec - span;
  uintptr_t base = (uintptr_t)si;
  __builtin_memcpy((void*)sp, (const void*)base, span);
  uint64_t* fr = (uint64_t*)rec;
  fr[0] = uc->uc_mcontext.regs[29];
  fr[1] = uc->uc_mcontext.regs[30];
  if (xoff) {
    uint64_t datap;
    __builtin_memcpy(&datap, (const char*)sp + xoff + 8, 8);
    datap = datap - base + sp;
    __builtin_memcpy((char*)sp + xoff + 8, &datap, 8);
  }
  *nsi = (siginfo_t*)sp;
  *nuc = (ucontext_t*)(sp + kSiginfoSize);
  return sp;
}

}  // namespace goshim::arch


// Enters fn on a frame sigframe_copy made at sp (its context uc): x29 at
// the frame record right above the frame.
[[noreturn]] inline void goshim_sigframe_enter(uintptr_t sp, int sig, void* si, void* uc,
                                               void (*fn)(int, siginfo_t*, void*)) {
  goshim_sigframe_enter_fp(sp, sig, si, uc, fn,
                           sp + goshim::arch::sigframe_span((const ucontext_t*)uc));
}
