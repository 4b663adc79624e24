// Asynchronous preemption (see preempt.hpp).
#include "core/preempt.hpp"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <sys/ucontext.h>
#include <ucontext.h>
#include <unistd.h>

#include <new>

#include "core/config.hpp"
#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "syscalls/sys.hpp"

#ifndef SYS_rt_tgsigqueueinfo
#define SYS_rt_tgsigqueueinfo 297
#endif

namespace goshim {

namespace {

constexpr int kPreemptMagic = 0x676f7072;  // "gopr" in si_value

// Text ranges that must not be preempted. Written under ranges_lock by
// init and dlopen, read lock-free by the signal handler.
struct Range {
  uintptr_t lo, hi;
};
constexpr int kMaxRanges = 32;
Range ranges[kMaxRanges];
std::atomic<int> nranges{0};
Mutex ranges_lock;  // rank: leaf

// The program's disposition for the preemption signal.
SpinLock prog_lock;
struct sigaction prog_action;
bool prog_action_set = false;

using sigaction_fn = int (*)(int, const struct sigaction*, struct sigaction*);
sigaction_fn real_sigaction;

bool unsafe_name(const char* name) {
  const char* base = strrchr(name, '/');
  base = base ? base + 1 : name;
  static const char* const prefixes[] = {"libc.so",      "ld-linux",   "libstdc++.so",
                                         "libgcc_s.so",  "libpthread", "linux-vdso",
                                         "libgoshim.so", "libdl.so",   "libunwind"};
  for (const char* p : prefixes)
    if (strncmp(base, p, strlen(p)) == 0) return true;
  return false;
}

int collect(struct dl_phdr_info* info, size_t, void* self_base) {
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  bool is_self = (void*)info->dlpi_addr == self_base;
  if (!is_self && !unsafe_name(name)) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    uintptr_t hi = lo + ph.p_memsz;
    int n = nranges.load(std::memory_order_relaxed);
    bool dup = false;
    for (int j = 0; j < n; j++)
      if (ranges[j].lo == lo) dup = true;
    if (dup || n >= kMaxRanges) continue;
    ranges[n] = Range{lo, hi};
    nranges.store(n + 1, std::memory_order_release);
  }
  return 0;
}

// Calls the program's own handler for a preemption-signal it sent or got.
void call_program_handler(int sig, siginfo_t* si, void* uc) {
  prog_lock.lock();
  struct sigaction act = prog_action;
  bool set = prog_action_set;
  if (set && (act.sa_flags & SA_RESETHAND)) {
    prog_action.sa_handler = SIG_DFL;
    prog_action.sa_flags &= ~SA_SIGINFO;
  }
  prog_lock.unlock();
  if (!set || act.sa_handler == SIG_IGN) return;
  if (act.sa_handler == SIG_DFL) {
    // SIGURG and SIGWINCH are ignored by default; anything else terminates
    // (or stops) the process like the kernel would.
    if (sig == SIGURG || sig == SIGWINCH || sig == SIGCHLD || sig == SIGCONT) return;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    real_sigaction(sig, &dfl, nullptr);
    uint64_t m = 1ull << (sig - 1);
    sys::rt_sigprocmask(SIG_UNBLOCK, &m, nullptr, 8);
    sys::tgkill(sys::getpid(), sys::gettid(), sig);
    return;
  }
  G* gp = tls_g;
  if (gp) gp->insig++;
  // Block the program's sa_mask while its handler runs, as the kernel would.
  uint64_t old = 0, add;
  memcpy(&add, &act.sa_mask, sizeof add);
  if (!(act.sa_flags & SA_NODEFER)) add |= 1ull << (sig - 1);
  sys::rt_sigprocmask(SIG_BLOCK, &add, &old, 8);
  if (act.sa_flags & SA_SIGINFO)
    act.sa_sigaction(sig, si, uc);
  else
    act.sa_handler(sig);
  sys::rt_sigprocmask(SIG_SETMASK, &old, nullptr, 8);
  if (gp) gp->insig--;
}

// The interrupted code runs on the G's own stack (not on an alternate
// signal stack, which belongs to the M, inside some handler).
bool on_own_stack(G* gp, ucontext_t* uc) {
  uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
  return gp->stack.hi && sp > gp->stack.lo && sp <= gp->stack.hi;
}

void preempt_handler(int sig, siginfo_t* si, void* uctx) {
  int saved_errno = errno;
  ucontext_t* uc = (ucontext_t*)uctx;
  bool ours = si && si->si_code == SI_QUEUE && si->si_value.sival_int == kPreemptMagic &&
              si->si_pid == (pid_t)sys::getpid();
  if (!ours) {
    call_program_handler(sig, si, uctx);
    errno = saved_errno;
    return;
  }
  G* gp = tls_g;
  M* mp = gp ? gp->m : nullptr;
  if (mp) mp->preempt_sent.store(false, std::memory_order_release);
  if (!gp || gp->is_g0() || !mp || mp->curg != gp ||
      gp->status.load(std::memory_order_relaxed) != GStatus::Running || gp->insig > 0 ||
      !gp->preempt.load(std::memory_order_relaxed) ||
      pc_unsafe((uintptr_t)uc->uc_mcontext.gregs[REG_RIP]) || !on_own_stack(gp, uc)) {
    errno = saved_errno;  // not here: the next interposed call yields
    return;
  }
  // A safe point. The kernel saved every register (and the xsave area)
  // in uc on this G's stack. Let the M run other Gs with the signal mask
  // the G had, park the G on the global queue from inside this frame, and
  // return (on whatever M resumes it) through rt_sigreturn.
  sys::rt_sigprocmask(SIG_SETMASK, &uc->uc_sigmask, nullptr, 8);
  gp->preempt.store(false, std::memory_order_relaxed);
  sched.npreempt.fetch_add(1, std::memory_order_relaxed);
  gosched_global();
  // Possibly another M now: rt_sigreturn restores the alternate signal
  // stack settings from the frame; give it this M's own.
  stack_t ss;
  if (sys::raw2(SYS_sigaltstack, 0, (long)&ss) == 0) uc->uc_stack = ss;
  errno = saved_errno;
}

}  // namespace

bool pc_unsafe(uintptr_t pc) {
  int n = nranges.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (pc >= ranges[i].lo && pc < ranges[i].hi) return true;
  return false;
}

void preempt_refresh_ranges() {
  Dl_info info;
  void* self = nullptr;
  if (dladdr((void*)&preempt_refresh_ranges, &info)) self = info.dli_fbase;
  MutexGuard g(ranges_lock);
  dl_iterate_phdr(collect, self);
}

void preempt_init() {
  preempt_refresh_ranges();
  int sig = config.preempt_signal;
  if (!sig) return;
  real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
  if (!real_sigaction) fatal("cannot resolve sigaction");
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  act.sa_sigaction = preempt_handler;
  act.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&act.sa_mask);
  if (real_sigaction(sig, &act, &old) != 0) fatal("cannot install the preemption handler");
  // A handler the program installed before goshim started stays its own.
  if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) {
    prog_lock.lock();
    prog_action = old;
    prog_action_set = true;
    prog_lock.unlock();
  }
}

void preempt_after_fork() {
  new (&ranges_lock) Mutex();
  new (&prog_lock) SpinLock();
}

bool preempt_owns_signal(int sig) { return sig > 0 && sig == config.preempt_signal; }

void preempt_program_action(const struct sigaction* act, struct sigaction* old) {
  prog_lock.lock();
  if (old) {
    if (prog_action_set) {
      *old = prog_action;
    } else {
      memset(old, 0, sizeof *old);
      old->sa_handler = SIG_DFL;
    }
  }
  if (act) {
    prog_action = *act;
    prog_action_set = true;
  }
  prog_lock.unlock();
}

void preemptone(P* pp) {
  M* mp = pp->m;
  if (!mp) return;
  G* gp = mp->curg;
  if (!gp || gp->is_g0()) return;
  gp->preempt.store(true, std::memory_order_release);
  pp->preempt.store(true, std::memory_order_relaxed);
  int sig = config.preempt_signal;
  if (!sig || mp->tid == 0) return;
  if (mp->preempt_sent.exchange(true, std::memory_order_acq_rel)) return;  // one in flight
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = sig;
  si.si_code = SI_QUEUE;
  si.si_pid = (pid_t)sys::getpid();
  si.si_uid = getuid();
  si.si_value.sival_int = kPreemptMagic;
  long r = sys::raw4(SYS_rt_tgsigqueueinfo, sys::getpid(), mp->tid, sig, (long)&si);
  if (r != 0) mp->preempt_sent.store(false, std::memory_order_release);
}

void preempt_at_call(G* gp, const void* caller_pc) {
  // Only from the program's own code: a call made from inside libc (say,
  // write() called by printf while it holds stdout's lock) must not park.
  if (pc_unsafe((uintptr_t)caller_pc)) return;
  M* mp = gp->m;
  if (!mp || mp->locks.load(std::memory_order_relaxed) > 0) return;
  gp->preempt.store(false, std::memory_order_relaxed);
  sched.npreempt.fetch_add(1, std::memory_order_relaxed);
  gosched_global();
}

}  // namespace goshim
