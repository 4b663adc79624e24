// Moving a signal frame (arch::sigframe_copy, goshim_sigframe_enter;
// core/signal.cpp, "The M's signal stack"): a frame the kernel (or
// qemu-user) pushed is copied to another stack, the handler entered again
// there, and its return is an rt_sigreturn that reads the copy: what the
// handler changes in the copy's context (signal mask, floating-point
// rounding mode) is what the interrupted code resumes with. On aarch64 also
// the record walk and the extra_context fix-up, on a frame made by hand
// (neither Linux on a CPU without SVE/SME nor qemu-user 7.2 writes one).
#include <criterion/criterion.h>
#include <fenv.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch/arch.hpp"

using namespace goshim;

namespace {

constexpr size_t kAltSize = 256 * 1024;
char* alt_lo;
volatile bool is_kernel, lo_ok, moved_ran, on_alt, si_ok, uc_on_alt;

// The copy's floating-point state: round toward zero.
void set_round_toward_zero(ucontext_t* uc) {
#if defined(__x86_64__)
  uc->uc_mcontext.fpregs->mxcsr = (uc->uc_mcontext.fpregs->mxcsr & ~0x6000u) | 0x6000u;
  uc->uc_mcontext.fpregs->cwd = (uint16_t)((uc->uc_mcontext.fpregs->cwd & ~0xc00u) | 0xc00u);
#elif defined(__aarch64__)
  unsigned char* r = uc->uc_mcontext.__reserved;
  for (size_t off = 0; off + 8 <= sizeof uc->uc_mcontext.__reserved;) {
    uint32_t magic, size;
    memcpy(&magic, r + off, 4);
    memcpy(&size, r + off + 4, 4);
    if (magic == 0 || size == 0) break;
    if (magic == 0x46508001) {  // FPSIMD_MAGIC: {head, fpsr, fpcr, vregs}
      uint32_t fpcr;
      memcpy(&fpcr, r + off + 12, 4);
      fpcr = (fpcr & ~0xc00000u) | 0xc00000u;  // RMode: toward zero
      memcpy(r + off + 12, &fpcr, 4);
      return;
    }
    off += size;
  }
#endif
}

void on_moved(int sig, siginfo_t* si, void* uctx) {
  char local;
  moved_ran = true;
  on_alt = &local > alt_lo && &local < alt_lo + kAltSize;
  uc_on_alt = (char*)uctx > alt_lo && (char*)uctx < alt_lo + kAltSize;
  si_ok = sig == SIGUSR1 && si->si_signo == SIGUSR1 && si->si_pid == getpid();
  ucontext_t* uc = (ucontext_t*)uctx;
  sigaddset(&uc->uc_sigmask, SIGUSR2);
  set_round_toward_zero(uc);
}

void on_kernel(int sig, siginfo_t* si, void* uctx) {
  ucontext_t* uc = (ucontext_t*)uctx;
  is_kernel = arch::sigframe_is_kernel(si, uc);
  if (!is_kernel) return;
  uintptr_t top = (uintptr_t)alt_lo + kAltSize - arch::kRedZone;
  uintptr_t lo = arch::sigframe_copy_lo(uc, top);
  siginfo_t* nsi;
  ucontext_t* nuc;
  uintptr_t sp = arch::sigframe_copy(si, uc, top, &nsi, &nuc);
  lo_ok = lo == sp && lo > (uintptr_t)alt_lo && lo < top;
  goshim_sigframe_enter(sp, sig, nsi, nuc, on_moved);
}

}  // namespace

Test(sigframe, moved_frame_returns_through_the_copy) {
  alt_lo = (char*)mmap(nullptr, kAltSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(alt_lo != MAP_FAILED);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_kernel;
  sa.sa_flags = SA_SIGINFO;
  cr_assert_eq(sigaction(SIGUSR1, &sa, nullptr), 0);
  sigset_t none;
  sigemptyset(&none);
  cr_assert_eq(sigprocmask(SIG_SETMASK, &none, nullptr), 0);
  cr_assert_eq(fesetround(FE_TONEAREST), 0);
  cr_assert_eq(raise(SIGUSR1), 0);
  int round = fegetround();
  sigset_t now;
  cr_assert_eq(sigprocmask(SIG_SETMASK, nullptr, &now), 0);
  fesetround(FE_TONEAREST);
  cr_assert(is_kernel, "the handler's arguments are the kernel's frame");
  cr_assert(lo_ok, "the copy starts at sigframe_copy_lo, inside the stack below top");
  cr_assert(moved_ran, "the handler ran again on the copy");
  cr_assert(on_alt, "on the other stack");
  cr_assert(uc_on_alt, "with the copy's context");
  cr_assert(si_ok, "and the copy's siginfo");
  cr_assert_eq(sigismember(&now, SIGUSR2), 1, "rt_sigreturn restored the copy's signal mask");
  cr_assert_eq(sigismember(&now, SIGUSR1), 0);
  cr_assert_eq(round, FE_TOWARDZERO, "rt_sigreturn restored the copy's floating-point state");
}

#if defined(__aarch64__)
namespace {

constexpr uint32_t kFpsimdMagic = 0x46508001;
constexpr uint32_t kFpsimdSize = 528;

void put_rec(unsigned char* p, uint32_t magic, uint32_t size) {
  memcpy(p, &magic, 4);
  memcpy(p + 4, &size, 4);
}

// A frame with an fpsimd record, an extra_context whose data (xsize bytes,
// a pattern) follows the fixed frame, and the terminators. Returns its
// ucontext.
ucontext_t* make_frame(unsigned char* base, uint32_t xsize) {
  memset(base, 0, arch::kSigframeFixed + xsize);
  ucontext_t* uc = (ucontext_t*)(base + arch::kSiginfoSize);
  for (int i = 0; i < 31; i++) uc->uc_mcontext.regs[i] = 0x1000 + i;
  unsigned char* r = uc->uc_mcontext.__reserved;
  put_rec(r, kFpsimdMagic, kFpsimdSize);
  put_rec(r + kFpsimdSize, arch::kExtraMagic, 32);
  uint64_t datap = (uint64_t)(base + arch::kSigframeFixed);
  memcpy(r + kFpsimdSize + 8, &datap, 8);
  memcpy(r + kFpsimdSize + 16, &xsize, 4);
  put_rec(r + kFpsimdSize + 32, 0, 0);
  unsigned char* x = base + arch::kSigframeFixed;
  for (uint32_t i = 0; i < xsize - 16; i++) x[i] = (unsigned char)(i * 7 + 3);
  put_rec(x + xsize - 16, 0, 0);
  return uc;
}

}  // namespace

Test(sigframe, aarch64_extra_context_is_copied_and_its_pointer_moved) {
  alignas(16) static unsigned char src[arch::kSigframeFixed + 4096];
  alignas(16) static unsigned char dst[2 * arch::kSigframeFixed + 8192];
  const uint32_t xsize = 1040;
  ucontext_t* uc = make_frame(src, xsize);
  siginfo_t* si = (siginfo_t*)src;
  size_t xoff = 0;
  cr_assert_eq(arch::sigframe_span(uc, &xoff), arch::kSigframeFixed + xsize);
  cr_assert_eq(xoff, arch::kSiginfoSize + 464 + kFpsimdSize);
  cr_assert(arch::sigframe_is_kernel(si, uc));
  uintptr_t top = (uintptr_t)dst + sizeof dst - 8;  // not 16-aligned
  siginfo_t* nsi;
  ucontext_t* nuc;
  uintptr_t lo = arch::sigframe_copy_lo(uc, top);
  uintptr_t sp = arch::sigframe_copy(si, uc, top, &nsi, &nuc);
  cr_assert_eq(sp, lo);
  cr_assert_eq(sp & 15, 0u, "the frame is 16-byte aligned");
  cr_assert_eq((uintptr_t)nsi, sp);
  cr_assert_eq((uintptr_t)nuc, sp + arch::kSiginfoSize);
  // The frame record right above the frame, below top: the interrupted x29, x30.
  uintptr_t rec = sp + arch::kSigframeFixed + xsize;
  cr_assert_leq(rec + 16, top);
  cr_assert_gt(rec + 32, top, "as the kernel: the record at the 16-byte boundary below top");
  cr_assert_eq(((uint64_t*)rec)[0], 0x1000u + 29);
  cr_assert_eq(((uint64_t*)rec)[1], 0x1000u + 30);
  // The copy's datap points at the copy's extra data, which is the same.
  uint64_t datap;
  memcpy(&datap, (unsigned char*)sp + xoff + 8, 8);
  cr_assert_eq(datap, sp + arch::kSigframeFixed);
  cr_assert_eq(memcmp((void*)datap, src + arch::kSigframeFixed, xsize), 0);
  cr_assert_eq(memcmp((void*)sp, src, arch::kSigframeFixed - 4096 + kFpsimdSize + 8), 0);
  // The copy is a frame too, of the same span.
  cr_assert_eq(arch::sigframe_span(nuc), arch::kSigframeFixed + xsize);
}

Test(sigframe, aarch64_bad_records_are_not_a_frame) {
  alignas(16) static unsigned char src[arch::kSigframeFixed + 4096];
  siginfo_t* si = (siginfo_t*)src;
  // A record running past __reserved.
  ucontext_t* uc = make_frame(src, 64);
  put_rec(uc->uc_mcontext.__reserved, kFpsimdMagic, 8192);
  cr_assert_not(arch::sigframe_is_kernel(si, uc));
  // No terminator: records up to the end of __reserved.
  uc = make_frame(src, 64);
  for (size_t off = 0; off < 4096; off += 16) put_rec(uc->uc_mcontext.__reserved + off, 0x1111, 16);
  cr_assert_not(arch::sigframe_is_kernel(si, uc));
  // A zero-sized record.
  uc = make_frame(src, 64);
  put_rec(uc->uc_mcontext.__reserved, kFpsimdMagic, 0);
  cr_assert_not(arch::sigframe_is_kernel(si, uc));
  // extra_context's data below the records, or misaligned.
  uc = make_frame(src, 64);
  uint64_t datap = (uint64_t)src;
  memcpy(uc->uc_mcontext.__reserved + kFpsimdSize + 8, &datap, 8);
  cr_assert_not(arch::sigframe_is_kernel(si, uc));
  uc = make_frame(src, 64);
  datap = (uint64_t)(src + arch::kSigframeFixed + 8);
  memcpy(uc->uc_mcontext.__reserved + kFpsimdSize + 8, &datap, 8);
  cr_assert_not(arch::sigframe_is_kernel(si, uc));
  // siginfo not right below the context.
  uc = make_frame(src, 64);
  cr_assert_not(arch::sigframe_is_kernel((siginfo_t*)(src + 16), uc));
  cr_assert(arch::sigframe_is_kernel(si, uc));
}
#endif
