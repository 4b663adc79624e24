// Which protocol the running glibc uses to act on SIGCANCEL in a thread
// blocked in one of its cancellable system calls (see cancelproto.hpp).
//
// glibc up to 2.40 switches the thread to asynchronous cancellation around
// the system call (__pthread_enable_asynccancel): its handler acts when the
// CANCELTYPE bit of cancelhandling is set. glibc 2.41 runs every
// cancellable system call through __syscall_cancel_arch and its handler
// acts when the interrupted instruction pointer lies in
// [__syscall_cancel_arch_start, __syscall_cancel_arch_end), the end being
// the instruction after the syscall (there the call has completed or
// returned EINTR by itself). Those two labels are local symbols of a
// stripped libc.so.6, so the range is found by observing it:
//
//   1. with __libc_single_threaded cleared (glibc takes the direct path in
//      a single-threaded process) and SIGCANCEL blocked and made pending,
//      call glibc's sigsuspend and then ppoll with a mask that unblocks it:
//      the kernel runs the probe handler at once and each call returns
//      EINTR. The handler records the interrupted instruction pointer and
//      cancelhandling.
//   2. CANCELTYPE set in both: the asynchronous protocol.
//   3. CANCELTYPE clear in both, both calls interrupted at the same
//      address E (one shared bridge), the two bytes before E are a syscall
//      instruction (0f 05) and the byte at E a ret (c3), and the unwind
//      information (_Unwind_Find_FDE) puts E - 1 in a function that starts
//      at most 64 bytes before E: the bridge protocol, with the range
//      [function start, E). (The function start precedes
//      __syscall_cancel_arch_start only by an endbr64, if any.)
//   4. anything else: not recognized; M:N does not start.
//
// The probe signal is SIGCANCEL. It is a real-time signal to the kernel,
// which queues each one against the user's RLIMIT_SIGPENDING: when that
// user's queue is full (every process of the user counts) tgkill fails
// with EAGAIN and nothing is pending, and sigsuspend slept for ever (a
// loaded test machine: `timeout` under goshim never started its command;
// `prlimit --sigpending=0` any program). The probe then uses a standard
// signal that is not pending (the kernel marks a standard signal pending
// without a queue entry), and it never calls into glibc unless its signal
// is pending: the calls above return at once whichever signal interrupts
// them (cancellation's state around the system call and the bridge's
// address do not depend on the signal).
#include "core/cancelproto.hpp"

#include <errno.h>
#include <gnu/libc-version.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include <atomic>

#include "arch/arch.hpp"
#include "core/real.hpp"
#include "core/tls.hpp"
#include "syscalls/sys.hpp"

struct dwarf_eh_bases {
  void* tbase;
  void* dbase;
  void* func;
};

namespace goshim {

namespace {

constexpr int kSigCancel = 32;
constexpr unsigned long kSaRestorer = 0x04000000;
constexpr int kCancelTypeAsync = 1 << 1;

struct KernelSigaction {
  void (*handler)(int, siginfo_t*, void*);
  unsigned long flags;
  void (*restorer)();
  uint64_t mask;
};

std::atomic<CancelProto> proto{CancelProto::Unknown};
std::atomic<uintptr_t> bridge_lo{0}, bridge_hi{0};

volatile uintptr_t probe_pc;
volatile int probe_ch;
volatile int probe_hits;

void probe_handler(int, siginfo_t*, void* uc) {
  probe_pc = arch::uc_pc((ucontext_t*)uc);
  probe_ch = *(volatile int*)(arch::get_tp() + tls::L.cancelhandling);
  probe_hits = probe_hits + 1;
}

// One probe: sig pending and blocked, then call (kind 0: sigsuspend, 1:
// ppoll) with it unblocked. Returns 1 if the call behaved, 0 if it did not,
// -1 if sig could not be made pending (nothing was called).
int probe_once(int kind, int sig, uintptr_t* pc, int* ch) {
  auto sigsuspend_p = real::lazy::sigsuspend();
  auto ppoll_p = real::lazy::ppoll();
  if (!sigsuspend_p || !ppoll_p) return 0;
  KernelSigaction ka, old;
  memset(&ka, 0, sizeof ka);
  ka.handler = probe_handler;
  ka.flags = SA_SIGINFO | kSaRestorer;
  ka.restorer = goshim_restore_rt;
  ka.mask = ~0ull;
  uint64_t bit = 1ull << (sig - 1), oldmask = 0, pend = 0;
  sys::rt_sigprocmask(SIG_BLOCK, &bit, &oldmask, 8);
  // Pending already (kept across exec): not ours to take.
  if (sys::raw2(SYS_rt_sigpending, (long)&pend, 8) != 0 || (pend & bit)) {
    sys::rt_sigprocmask(SIG_SETMASK, &oldmask, nullptr, 8);
    return -1;
  }
  if (sys::raw4(SYS_rt_sigaction, sig, (long)&ka, (long)&old, 8) != 0) {
    sys::rt_sigprocmask(SIG_SETMASK, &oldmask, nullptr, 8);
    return 0;
  }
  probe_hits = 0;
  int ret = -1;
  if (sys::tgkill(sys::getpid(), sys::gettid(), sig) == 0 &&
      sys::raw2(SYS_rt_sigpending, (long)&pend, 8) == 0 && (pend & bit)) {
    sigset_t open;
    memset(&open, 0, sizeof open);
    uint64_t m = oldmask & ~bit;
    memcpy(&open, &m, sizeof m);
    int saved = errno;
    int r = kind == 0 ? sigsuspend_p(&open) : ppoll_p(nullptr, 0, nullptr, &open);
    ret = r == -1 && errno == EINTR && probe_hits == 1;
    errno = saved;
  }
  sys::rt_sigprocmask(SIG_SETMASK, &oldmask, nullptr, 8);
  sys::raw4(SYS_rt_sigaction, sig, (long)&old, 0, 8);
  *pc = probe_pc;
  *ch = probe_ch;
  return ret;
}

// Both probes with one signal: SIGCANCEL, else (it cannot be queued) the
// first standard signal of a few that is not pending.
bool probe_both(uintptr_t pc[2], int ch[2]) {
  static const int sigs[] = {kSigCancel, SIGURG, SIGWINCH, SIGCHLD};
  for (int sig : sigs) {
    int r = probe_once(0, sig, &pc[0], &ch[0]);
    if (r < 0) continue;
    if (r == 0) return false;
    r = probe_once(1, sig, &pc[1], &ch[1]);
    if (r < 0) continue;
    return r == 1;
  }
  return false;
}

}  // namespace

bool cancel_proto_init(char* why, size_t n) {
  const char* ver = gnu_get_libc_version();
  int* chp = (int*)(arch::get_tp() + tls::L.cancelhandling);
  if (!tls::L.cancelhandling) {
    snprintf(why, n, "cancelhandling offset unknown");
    return false;
  }
  // Cancellation must be enabled for glibc to use its cancellable path.
  int saved_ch = *chp;
  if (saved_ch & 1) __atomic_and_fetch(chp, ~1, __ATOMIC_RELAXED);
  char* st = real::lazy::__libc_single_threaded();  // glibc 2.32+
  char saved_st = st ? *st : 0;
  if (st) *st = 0;
  uintptr_t pc[2] = {0, 0};
  int ch[2] = {0, 0};
  bool ok = probe_both(pc, ch);
  if (st) *st = saved_st;
  if (saved_ch & 1) __atomic_or_fetch(chp, 1, __ATOMIC_RELAXED);
  if (!ok) {
    snprintf(why, n, "glibc %s: probe calls did not return EINTR (or no probe signal could be made pending)", ver);
    return false;
  }
  uintptr_t lo = 0, hi = 0;
  CancelProto p = cancel_proto_classify(pc, ch, &lo, &hi);
  if (p == CancelProto::Bridge) {
    bridge_lo.store(lo, std::memory_order_relaxed);
    bridge_hi.store(hi, std::memory_order_relaxed);
  }
  if (p != CancelProto::Unknown) {
    proto.store(p, std::memory_order_release);
    return true;
  }
  snprintf(why, n,
           "glibc %s: cancellation protocol not recognized (sigsuspend at %#lx type %d, "
           "ppoll at %#lx type %d)",
           ver, (unsigned long)pc[0], (ch[0] & kCancelTypeAsync) != 0, (unsigned long)pc[1],
           (ch[1] & kCancelTypeAsync) != 0);
  return false;
}

CancelProto cancel_proto_classify(const uintptr_t pc[2], const int ch[2], uintptr_t* lo,
                                  uintptr_t* hi) {
  bool async0 = ch[0] & kCancelTypeAsync, async1 = ch[1] & kCancelTypeAsync;
  if (async0 && async1) return CancelProto::Async;
  if (!async0 && !async1 && pc[0] == pc[1] && pc[0] > 2) {
    const unsigned char* e = (const unsigned char*)pc[0];
    auto find = real::lazy::_Unwind_Find_FDE();
    struct dwarf_eh_bases bases = {nullptr, nullptr, nullptr};
    if (e[-2] == 0x0f && e[-1] == 0x05 && e[0] == 0xc3 && find &&
        find((void*)(pc[0] - 1), (void*)&bases) && bases.func) {
      uintptr_t start = (uintptr_t)bases.func;
      if (start < pc[0] - 2 && pc[0] - start <= 64) {
        *lo = start;
        *hi = pc[0];
        return CancelProto::Bridge;
      }
    }
  }
  return CancelProto::Unknown;
}

CancelProto cancel_proto() { return proto.load(std::memory_order_acquire); }

bool cancel_in_glibc_bridge(uintptr_t pc) {
  return pc >= bridge_lo.load(std::memory_order_relaxed) &&
         pc < bridge_hi.load(std::memory_order_relaxed);
}

}  // namespace goshim
