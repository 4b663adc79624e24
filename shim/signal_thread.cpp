// The per-thread side of signals: masks, sending to a thread, pending
// sets, alternate stacks, waiting for signals, and pthread_cancel. For a
// goroutine each acts on the G (core/signal); on a foreign thread, before
// init and in 1:1 mode, glibc's own functions do.
#include <errno.h>
#include <gnu/libc-version.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>

#include "core/privfd.hpp"
#include "core/proc.hpp"
#include "core/rawlog.hpp"
#include "core/runtime.hpp"
#include "core/sema.hpp"
#include "core/signal.hpp"
#include "shim/shim.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

bool ours(pthread_t t) { return mn_active() && is_goshim_tp(t); }

uint64_t bits(const sigset_t* s) {
  uint64_t v;
  memcpy(&v, s, sizeof v);
  return v;
}

// As glibc's sigtimedwait: the kernel's SI_TKILL (tkill, tgkill: raise,
// pthread_kill) is reported as SI_USER.
int fold_tkill(int sig, siginfo_t* info) {
  if (sig > 0 && info && info->si_code == SI_TKILL) info->si_code = SI_USER;
  return sig;
}

// sigwait family on a goroutine: take a pending signal of set, else park
// until one is routed here, a handler runs (EINTR for the info variants)
// or the deadline passes. Returns the signal, or -errno.
//
// No lost wake-up: the word is read first, then the set is published
// (signal_waiting), then pending signals are looked at. A signal made
// pending on gp after that look was made pending by a sender or sysmon
// that then saw the set and bumped the word (signal_wake_waiter), so the
// park returns at once or is ended; one made pending before it is found.
int wait_for(G* gp, uint64_t set, siginfo_t* info, int64_t deadline, bool eintr) {
  set &= ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)));
  // A SIGPIPE or SIGXFSZ the kernel raised for gp's write is pending on
  // this kernel thread (fwrite's write is glibc's own, not goshim's).
  signal_claim_raised(gp, set, Raised::Mine);
  for (;;) {
    cancel_point();
    uint32_t seq = __atomic_load_n(&gp->sigwait_word, __ATOMIC_SEQ_CST);
    uint32_t handled = gp->nhandled;
    // -1: an older one is still in the kernel; the published set lets
    // sysmon take it, and the take after publishing waits for that.
    int sig = signal_take(gp, set, info, false);  // already pending: no need to publish
    if (sig > 0) return fold_tkill(sig, info);
    signal_waiting(gp, set);
    sig = signal_take(gp, set, info, true);
    int r = 0;
    if (!sig) r = sema_wait(&gp->sigwait_word, seq, deadline, WaitReason::SigWait);
    signal_waiting(gp, 0);
    if (!sig) sig = signal_take(gp, set, info, false);
    signal_wait_done(gp);  // what was routed here and not taken: back to the process
    if (sig > 0) return fold_tkill(sig, info);
    if (sig < 0) continue;
    if (r == ETIMEDOUT) return -EAGAIN;
    if (eintr && gp->nhandled != handled) return -EINTR;
  }
}

// sigsuspend on a goroutine: mask replaced by mask until a handler runs.
// The same protocol as wait_for: what is routed here while the set is
// published is delivered after the wait (park delivers it when the wait
// parked; not when it returned at once).
int suspend(G* gp, uint64_t mask) {
  // A cancellation point: a pending cancellation acts before the mask
  // changes, also when a signal it unblocks is pending (glibc's sigsuspend
  // and pause act at entry).
  cancel_point();
  sigset_t m, old;
  sigemptyset(&m);
  memcpy(&m, &mask, sizeof mask);
  uint32_t handled = gp->nhandled;
  signal_setmask(gp, SIG_SETMASK, &m, &old);  // delivers what it unblocks
  while (gp->nhandled == handled) {
    cancel_point();
    uint32_t seq = __atomic_load_n(&gp->sigwait_word, __ATOMIC_SEQ_CST);
    signal_waiting(gp, ~gp->sigmask);
    // A handler the kernel ran here before the set was published counts;
    // a process signal it gives this M after that is held and routed back
    // here through sysmon (signal_handler), which bumps the word.
    if (!signal_has_pending(gp) && __atomic_load_n(&gp->nhandled, __ATOMIC_RELAXED) == handled)
      sema_wait(&gp->sigwait_word, seq, 0, WaitReason::SigWait);
    signal_waiting(gp, 0);
    if (signal_has_pending(gp)) signal_deliver(gp);
  }
  signal_setmask(gp, SIG_SETMASK, &old, nullptr);
  errno = EINTR;
  return -1;
}

}  // namespace

// The goroutine whose own signal mask a mask call changes: M:N
// (shim::user_g) or bound to its kernel thread by a real-time policy
// (core/rtlock.hpp), outside a program signal handler.
static G* mask_g() {
  if (G* gp = shim::user_g()) return gp;
  G* g = tls_g;
  return g && !g->is_g0() && g->rt_locked && g->insig == 0 && mn_active() ? g : nullptr;
}

// longjmp, _longjmp, siglongjmp and __longjmp_chk (_FORTIFY_SOURCE's
// longjmp). On a goroutine: a jump out of a program signal handler ends
// the handler for goshim too (signal_longjmp), and the mask a sigsetjmp
// saved is set through goshim, then glibc jumps with a copy of env that
// restores none (glibc would set it with its internal sigprocmask, behind
// the G's mask and its M's kernel mask).
namespace {
using JumpFn = void (*)(struct __jmp_buf_tag*, int);

[[noreturn]] void jump(JumpFn* real_jump, struct __jmp_buf_tag* env, int val) {
  struct __jmp_buf_tag copy;
  if (tls_g && mn_active() &&
      signal_longjmp(env, env->__mask_was_saved ? &env->__saved_mask : nullptr)) {
    memcpy(&copy, env, sizeof copy);
    copy.__mask_was_saved = 0;
    env = &copy;
  }
  shim::ensure_real();
  (*real_jump)(env, val);
  __builtin_unreachable();
}
}  // namespace

GOSHIM_EXPORT void longjmp(struct __jmp_buf_tag env[1], int val) { jump(&real::longjmp, env, val); }
GOSHIM_EXPORT void _longjmp(struct __jmp_buf_tag env[1], int val) { jump(&real::_longjmp, env, val); }
GOSHIM_EXPORT void siglongjmp(struct __jmp_buf_tag env[1], int val) {
  jump(&real::siglongjmp, env, val);
}
GOSHIM_EXPORT void __longjmp_chk(struct __jmp_buf_tag env[1], int val) {
  jump(&real::__longjmp_chk, env, val);
}

GOSHIM_EXPORT int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  if (G* gp = mask_g()) return signal_setmask(gp, how, set, old);
  shim::ensure_real();
  return real::pthread_sigmask(how, set, old);
}

GOSHIM_EXPORT int sigprocmask(int how, const sigset_t* set, sigset_t* old) {
  if (G* gp = mask_g()) {
    int r = signal_setmask(gp, how, set, old);
    if (r) {
      errno = r;
      return -1;
    }
    return 0;
  }
  shim::ensure_real();
  return real::sigprocmask(how, set, old);
}

// A real-time signal this process queues to itself through the kernel
// (not to a goroutine: signal_send checks those): the kernel counts the
// user's queued signals, less the instances goshim took out of its queue
// and holds; natively those would count (signal_queue_room). kill() is
// not checked: the kernel never refuses it (SI_USER), it drops the
// siginfo instead.
static bool self_queue_full(int sig) { return sig >= 32 && sig <= 64 && mn_active() && !signal_queue_room(); }

GOSHIM_EXPORT int pthread_kill(pthread_t t, int sig) {
  if (!ours(t)) {
    if (self_queue_full(sig)) return EAGAIN;
    shim::ensure_real();
    return real::pthread_kill(t, sig);
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  return signal_send(gp, sig, nullptr);
}

GOSHIM_EXPORT int pthread_sigqueue(pthread_t t, int sig, const union sigval value) {
  if (!ours(t)) {
    if (self_queue_full(sig)) return EAGAIN;
    shim::ensure_real();
    return real::pthread_sigqueue(t, sig, value);
  }
  G* gp = g_from_pthread(t);
  // glibc's looks at the thread's tid first, which is 0 once it exited.
  if (!gp || thread_exited(gp)) return ESRCH;
  return signal_send(gp, sig, sig ? &value : nullptr);
}

GOSHIM_EXPORT int raise(int sig) {
  if (G* gp = shim::user_g()) {
    int r = signal_send(gp, sig, nullptr);
    if (r) {
      errno = r;
      return -1;
    }
    return 0;
  }
  if (self_queue_full(sig)) {
    errno = EAGAIN;
    return -1;
  }
  shim::ensure_real();
  return real::raise(sig);
}

// kill and sigqueue: a signal that reaches the caller's own process is
// delivered to the calling thread before the call returns when it leaves
// it open (signal_sent_to_self). The system calls are made directly, as
// glibc's wrappers make them.
namespace {
bool reaches_self(pid_t pid) {
  pid_t self = (pid_t)sys::getpid();
  return pid == self || pid == 0 || (pid < -1 && -pid == (pid_t)sys::raw1(SYS_getpgid, 0));
}
int sent(long r) {
  if (r < 0) {
    errno = (int)-r;
    return -1;
  }
  return 0;
}
}  // namespace

GOSHIM_EXPORT int kill(pid_t pid, int sig) {
  G* gp = shim::user_g();
  if (!gp || sig <= 0 || !reaches_self(pid)) return sent(sys::raw2(SYS_kill, pid, sig));
  uint32_t h0 = __atomic_load_n(&gp->nhandled, __ATOMIC_ACQUIRE);
  long r = sys::raw2(SYS_kill, pid, sig);
  if (r == 0) signal_sent_to_self(gp, sig, h0);
  return sent(r);
}

// killpg: glibc's (sysdeps/posix/killpg.c) calls its internal __kill, which
// an interposer does not see; so a killpg of the own group returned before
// the handler ran on the caller. glibc's contract, through the kill above:
// a negative group is EINVAL, else kill(-pgrp, sig) (0: the caller's group).
GOSHIM_EXPORT int killpg(pid_t pgrp, int sig) {
  if (pgrp < 0) {
    errno = EINVAL;
    return -1;
  }
  return kill(-pgrp, sig);
}

GOSHIM_EXPORT int sigqueue(pid_t pid, int sig, const union sigval value) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = sig;
  si.si_code = SI_QUEUE;
  si.si_pid = (pid_t)sys::getpid();
  si.si_uid = (uid_t)sys::raw0(SYS_getuid);
  si.si_value = value;
  if (pid == si.si_pid && self_queue_full(sig)) return sent(-EAGAIN);
  G* gp = shim::user_g();
  if (!gp || sig <= 0 || pid != si.si_pid) return sent(sys::raw3(SYS_rt_sigqueueinfo, pid, sig, (long)&si));
  uint32_t h0 = __atomic_load_n(&gp->nhandled, __ATOMIC_ACQUIRE);
  long r = sys::raw3(SYS_rt_sigqueueinfo, pid, sig, (long)&si);
  if (r == 0) signal_sent_to_self(gp, sig, h0);
  return sent(r);
}

// pidfd_send_signal (glibc 2.36's is the bare system call): a signal sent
// through a pidfd of the caller's own process is, for the kernel, kill()
// of it, and natively reaches the calling thread before the call returns
// when it is the only one that leaves it open. So as kill above: the
// pidfd's process (fdinfo's Pid, read through the caller's kernel thread's
// fd table on goshim's privfd thread) and the scope the flags and the
// pidfd's type give (a thread pidfd, PIDFD_THREAD = O_EXCL, or
// PIDFD_SIGNAL_THREAD address one kernel thread: not the goroutine).
namespace {
// <linux/pidfd.h>'s flags (Linux 6.9); PIDFD_SIGNAL_THREAD_GROUP (1 << 1)
// is the process, as flags 0 on a process pidfd.
constexpr unsigned kPidfdSignalThread = 1u << 0, kPidfdSignalProcessGroup = 1u << 2;

// The value after "key:\t" in text (base 8 or 10), or -1.
long fdinfo_field(const char* text, const char* key, int base) {
  size_t n = strlen(key);
  for (const char* p = text; *p;) {
    if (strncmp(p, key, n) == 0 && p[n] == ':') {
      const char* q = p + n + 1;
      while (*q == ' ' || *q == '\t') q++;
      if (*q < '0' || *q > '9') return -1;
      long v = 0;
      while (*q >= '0' && *q < '0' + base) v = v * base + (*q++ - '0');
      return v;
    }
    const char* nl = strchr(p, '\n');
    if (!nl) break;
    p = nl + 1;
  }
  return -1;
}

bool pidfd_reaches_self(int pidfd, unsigned flags) {
  if (pidfd < 0 || (flags & kPidfdSignalThread)) return false;
  char path[64], buf[512];
  rawfmt(path, sizeof path, "/proc/self/task/%d/fdinfo/%d", (int)sys::gettid(), pidfd);
  if (privfd_read(path, buf, sizeof buf) <= 0) return false;
  long pid = fdinfo_field(buf, "Pid", 10), fflags = fdinfo_field(buf, "flags", 8);
  if (pid <= 0) return false;  // not a pidfd (a /proc/PID directory: passed through)
  if (flags & kPidfdSignalProcessGroup)
    return sys::raw1(SYS_getpgid, pid) == sys::raw1(SYS_getpgid, 0);
  if (flags == 0 && fflags >= 0 && (fflags & O_EXCL)) return false;  // a thread pidfd
  return pid == (long)sys::getpid();
}
}  // namespace

GOSHIM_EXPORT int pidfd_send_signal(int pidfd, int sig, siginfo_t* info, unsigned int flags) {
  G* gp = shim::user_g();
  if (!gp || sig <= 0 || !pidfd_reaches_self(pidfd, flags))
    return sent(sys::raw4(SYS_pidfd_send_signal, pidfd, sig, (long)info, flags));
  uint32_t h0 = __atomic_load_n(&gp->nhandled, __ATOMIC_ACQUIRE);
  long r = sys::raw4(SYS_pidfd_send_signal, pidfd, sig, (long)info, flags);
  if (r == 0) signal_sent_to_self(gp, sig, h0);
  return sent(r);
}

namespace {
// The program's memory as the kernel reads and writes it for the signal
// calls (sigpending, sigaltstack, and the system calls through syscall()):
// an address that is not mapped (or not writable) is EFAULT, not a fault
// in goshim (process_vm_readv/writev of the own process; these calls are
// rare next to a copy). LTP's rt_sigpending02 and rt_sigaction02 pass such
// pointers.
bool user_in(void* dst, const void* src, size_t n) { return sys::read_self(dst, src, n); }
bool user_out(void* dst, const void* src, size_t n) { return sys::write_self(dst, src, n); }

}  // namespace

GOSHIM_EXPORT int sigpending(sigset_t* set) {
  if (G* gp = shim::user_g()) {
    sigset_t s;
    signal_pending_set(gp, &s);
    if (!user_out(set, &s, sizeof s)) {
      errno = EFAULT;
      return -1;
    }
    return 0;
  }
  shim::ensure_real();
  return real::sigpending(set);
}

GOSHIM_EXPORT int sigaltstack(const stack_t* ss, stack_t* old) {
  if (G* gp = shim::user_g()) {
    stack_t in, out;
    if (ss && !user_in(&in, ss, sizeof in)) {
      errno = EFAULT;
      return -1;
    }
    int r = signal_altstack(gp, ss ? &in : nullptr, old ? &out : nullptr);
    if (r == 0 && old && !user_out(old, &out, sizeof out)) r = EFAULT;
    if (r) {
      errno = r;
      return -1;
    }
    return 0;
  }
  shim::ensure_real();
  return real::sigaltstack(ss, old);
}

GOSHIM_EXPORT int sigwait(const sigset_t* set, int* sig) {
  if (G* gp = shim::user_g()) {
    int r = wait_for(gp, bits(set), nullptr, 0, false);
    if (r < 0) return -r;
    *sig = r;
    return 0;
  }
  shim::ensure_real();
  return real::sigwait(set, sig);
}

GOSHIM_EXPORT int sigwaitinfo(const sigset_t* set, siginfo_t* info) {
  if (G* gp = shim::user_g()) {
    siginfo_t tmp;
    int r = wait_for(gp, bits(set), info ? info : &tmp, 0, true);
    if (r < 0) {
      errno = -r;
      return -1;
    }
    return r;
  }
  shim::ensure_real();
  return real::sigwaitinfo(set, info);
}

GOSHIM_EXPORT int sigtimedwait(const sigset_t* set, siginfo_t* info, const struct timespec* ts) {
  if (G* gp = shim::user_g()) {
    int64_t deadline = 0;
    if (ts) {
      if (ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000 || ts->tv_sec < 0) {
        errno = EINVAL;
        return -1;
      }
      deadline = sys::nanotime() + (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
    }
    siginfo_t tmp;
    int r = wait_for(gp, bits(set), info ? info : &tmp, deadline, true);
    if (r < 0) {
      errno = -r;
      return -1;
    }
    return r;
  }
  shim::ensure_real();
  return real::sigtimedwait(set, info, ts);
}

GOSHIM_EXPORT int sigsuspend(const sigset_t* mask) {
  if (G* gp = shim::user_g()) return suspend(gp, bits(mask));
  shim::ensure_real();
  // Inside a program handler on a goroutine: the kernel's sigsuspend, with
  // the signals it opens sent to this thread.
  G* g = tls_g;
  if (g && !g->is_g0() && g->insig > 0 && mn_active() && g->m && g->m->curg == g)
    return signal_ksuspend(g, mask, real::sigsuspend);
  return real::sigsuspend(mask);
}

GOSHIM_EXPORT int pause(void) {
  if (G* gp = shim::user_g()) return suspend(gp, gp->sigmask);
  shim::ensure_real();
  return real::pause();
}

GOSHIM_EXPORT int pthread_cancel(pthread_t t) {
  if (!ours(t)) {
    shim::ensure_real();
    int r = real::pthread_cancel(t);
    // A kernel thread of a 1:1 process in one of goshim's cancellable
    // waits: glibc before 2.34 signals only an asynchronous target.
    if (r == 0 && !mn_active()) foreign_cancel_kick((unsigned long)t);
    return r;
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  return cancel_send(gp);
}

// ---- glibc's other mask entry points -----------------------------------------
//
// glibc implements these on its internal __sigprocmask/__sigsuspend/
// __sigaltstack/__pthread_kill, which an interposer does not see (the
// kernel mask of the M would change under the G's feet, and the G's own
// mask would not): each is rebuilt here, as glibc 2.36 writes it, on top of
// the interposed sigprocmask/sigsuspend/sigaltstack/raise.

namespace {

// sigset-cvt-mask.h: an old-style int mask is the low 32 bits of the set.
void set_from_old_mask(sigset_t* set, int mask) {
  sigemptyset(set);
  uint64_t v = (unsigned int)mask;
  memcpy(set, &v, sizeof v);
}
int old_mask_of(const sigset_t* set) { return (int)(unsigned int)bits(set); }

int one_signal(int how, int sig) {
  sigset_t set;
  sigemptyset(&set);
  if (sigaddset(&set, sig) < 0) return -1;  // EINVAL, also for 32 and 33
  return sigprocmask(how, &set, nullptr);
}

int old_mask_op(int how, int mask) {
  sigset_t set, oset;
  set_from_old_mask(&set, mask);
  if (sigprocmask(how, &set, &oset) < 0) return -1;
  return old_mask_of(&oset);
}

}  // namespace

GOSHIM_EXPORT int sighold(int sig) { return one_signal(SIG_BLOCK, sig); }

GOSHIM_EXPORT int sigrelse(int sig) { return one_signal(SIG_UNBLOCK, sig); }

GOSHIM_EXPORT int sigblock(int mask) { return old_mask_op(SIG_BLOCK, mask); }

GOSHIM_EXPORT int sigsetmask(int mask) { return old_mask_op(SIG_SETMASK, mask); }

GOSHIM_EXPORT int siggetmask(void) { return old_mask_op(SIG_BLOCK, 0); }

GOSHIM_EXPORT int __sigsuspend(const sigset_t* mask) { return sigsuspend(mask); }

// is_sig: X/Open sigpause (the current mask without sig); else BSD (an
// old-style mask replaces the mask). A cancellation point through
// sigsuspend.
GOSHIM_EXPORT int __sigpause(int sig_or_mask, int is_sig) {
  sigset_t set;
  if (is_sig) {
    if (sigprocmask(0, nullptr, &set) < 0 || sigdelset(&set, sig_or_mask) < 0) return -1;
  } else {
    set_from_old_mask(&set, sig_or_mask);
  }
  return sigsuspend(&set);
}

// The symbol sigpause is the BSD one; <signal.h> redirects the X/Open
// sigpause(sig) to __xpg_sigpause (and declares sigpause so here, hence
// the other C name).
GOSHIM_EXPORT int bsd_sigpause(int mask) __asm__("sigpause");
GOSHIM_EXPORT int bsd_sigpause(int mask) { return __sigpause(mask, 0); }

GOSHIM_EXPORT int __xpg_sigpause(int sig) { return __sigpause(sig, 1); }

GOSHIM_EXPORT int gsignal(int sig) { return raise(sig); }

// abort: glibc's (stdlib/abort.c) unblocks SIGABRT with its internal
// sigprocmask, raises it with its internal raise (a tgkill of the M) and
// resets it with its internal sigaction, none of which an interposer sees:
// a goroutine that blocked SIGABRT and handles it died without its handler
// running (goshim held the signal for the G, whose mask still blocked it).
// Rebuilt here, as glibc 2.36 writes it, on the interposed calls (which
// pass other callers to glibc). glibc's recursive lock and stage counter
// only order concurrent and nested calls, which end the same way: a
// handler that returns is followed by the default action; one that jumps
// out leaves abort. Not covered: glibc's own calls of abort (assert,
// malloc and fortify failures) stay glibc's.
namespace {
// glibc 2.41 rewrote abort (async-signal-safe): it no longer unblocks
// SIGABRT before its first raise, so a thread that blocks SIGABRT dies
// without its handler running; up to 2.40 the handler runs.
bool abort_unblocks() {
  static int v = -1;
  if (v < 0) {
    const char* s = gnu_get_libc_version();
    int maj = 0, min = 0;
    while (*s >= '0' && *s <= '9') maj = maj * 10 + (*s++ - '0');
    if (*s == '.') s++;
    while (*s >= '0' && *s <= '9') min = min * 10 + (*s++ - '0');
    v = maj < 2 || (maj == 2 && min <= 40);
  }
  return v;
}
}  // namespace

GOSHIM_EXPORT void abort(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGABRT);
  if (abort_unblocks()) sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(SIGABRT);  // a handler runs here, and may leave
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = SIG_DFL;
  sigfillset(&act.sa_mask);
  sigaction(SIGABRT, &act, nullptr);
  // The kernel's default action at once (glibc's second raise is its own
  // tgkill): goshim's raise() inside a program handler of SIGABRT (a
  // handler that ends with signal(SIGABRT, SIG_DFL); abort();) leaves the
  // handler's own signal for after the handler, so the process reached the
  // halt below and died by SIGSEGV (review24 F1).
  signal_die_default(SIGABRT);
#if defined(__x86_64__)
  __asm__ volatile("hlt");  // glibc's ABORT_INSTRUCTION
#endif
  _exit(127);
  for (;;) __builtin_trap();
}

// The old sigstack: no size, so everything below ss_sp is the stack.
GOSHIM_EXPORT int sigstack(struct sigstack* ss, struct sigstack* oss) {
  stack_t sas, osas;
  stack_t* sasp = nullptr;
  if (ss) {
    sas.ss_sp = ss->ss_sp;
    sas.ss_flags = ss->ss_onstack ? SS_ONSTACK : 0;
    sas.ss_size = (size_t)ss->ss_sp;
    sasp = &sas;
  }
  int r = sigaltstack(sasp, oss ? &osas : nullptr);
  if (r == 0 && oss) {
    oss->ss_sp = osas.ss_sp;
    oss->ss_onstack = (osas.ss_flags & SS_ONSTACK) != 0;
  }
  return r;
}

// ---- the signal system calls made through syscall() ---------------------------
//
// arch/<arch>/syscall.S routes these numbers here: made directly, they
// acted behind goshim's back (a raw rt_sigprocmask changed the M's kernel
// mask, not the goroutine's; a raw rt_sigaction replaced goshim's routing
// handler in the kernel; a raw kill of the own process could reach another
// kernel thread and the caller's handler ran after the call returned).
// Each gets what its libc function gets here, in the kernel's ABI: 8-byte
// signal sets (another sigsetsize is EINVAL, as the kernel says; rt_sigpending
// accepts up to 8), struct kernel_sigaction, and no SI_TKILL folding in
// rt_sigtimedwait. Foreign threads, init and 1:1 mode: the kernel, as
// before (rt_sigaction: what sigaction() does there, the system call plus
// goshim's record of the disposition). tgkill/tkill/rt_tgsigqueueinfo to
// the caller's own thread (its gettid(), the M's tid, 7.5) go to the
// calling goroutine, as raise and pthread_sigqueue do; other tids: the
// kernel. syscall()'s convention: the result, or -1 with errno.
namespace {

// The kernel's struct sigaction for rt_sigaction (x86_64 and the generic
// table alike: both have the restorer).
struct kernel_sigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)(void);
  uint64_t mask;
};

void set_from_bits(sigset_t* s, uint64_t m) {
  sigemptyset(s);
  memcpy(s, &m, sizeof m);
}

// A signal the calling goroutine sends to its own thread (sig 0, goshim's
// own 32/33 and foreign callers: the kernel). tgid kNoTgid: tkill's (a
// tgkill's tgid <= 0 goes to the kernel, which answers EINVAL).
constexpr long kNoTgid = -(1l << 40);
bool to_own_thread(G* gp, long tgid, long tid, long sig) {
  return gp && sig > 0 && sig <= 64 && sig != 32 && sig != 33 && (int)tid == (int)sys::gettid() &&
         (tgid == kNoTgid || (int)tgid == (int)sys::getpid());
}

long raw_sigaction(long sig, const kernel_sigaction* kact, kernel_sigaction* kold) {
  if (!mn_active()) {
    long r = sys::raw4(SYS_rt_sigaction, sig, (long)kact, (long)kold, 8);
    if (r == 0 && kact && sig >= 1 && sig <= 64) {
      struct sigaction act;
      memset(&act, 0, sizeof act);
      act.sa_handler = kact->handler;
      act.sa_flags = (int)kact->flags;
      set_from_bits(&act.sa_mask, kact->mask);
      signal_record_action((int)sig, &act);
    }
    return r;
  }
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  memset(&old, 0, sizeof old);
  if (kact) {
    act.sa_handler = kact->handler;
    act.sa_flags = (int)kact->flags;
    act.sa_restorer = kact->restorer;
    set_from_bits(&act.sa_mask, kact->mask);
  }
  if (sig < 1 || sig > 64 || (kact && (sig == SIGKILL || sig == SIGSTOP))) return -EINVAL;
  int r = signal_action((int)sig, kact ? &act : nullptr, kold ? &old : nullptr);
  if (r < 0) return r;
  if (kold) {
    kold->handler = old.sa_handler;
    kold->flags = (unsigned long)(unsigned int)old.sa_flags;
    kold->restorer = old.sa_restorer;
    kold->mask = bits(&old.sa_mask);
  }
  return 0;
}

// syscall()'s convention: the result, or -1 with errno.
long ret(long r) {
  if (r < 0) {
    errno = (int)-r;
    return -1;
  }
  return r;
}

long self_sent(G* gp, int sig, long nr, long a1, long a2, long a3, long a4) {
  uint32_t h0 = __atomic_load_n(&gp->nhandled, __ATOMIC_ACQUIRE);
  long r = sys::raw4(nr, a1, a2, a3, a4);
  if (r == 0) signal_sent_to_self(gp, sig, h0);
  return r;
}

}  // namespace

extern "C" __attribute__((visibility("hidden"))) long goshim_syscall_signal(long nr, long a1, long a2,
                                                                           long a3, long a4, long a5,
                                                                           long a6) {
  long r;
  switch (nr) {
    case SYS_kill:
      return kill((pid_t)a1, (int)a2);
    case SYS_pidfd_send_signal:
      return pidfd_send_signal((int)a1, (int)a2, (siginfo_t*)a3, (unsigned)a4);
    case SYS_rt_sigqueueinfo: {
      pid_t self = (pid_t)sys::getpid();
      if ((pid_t)a1 == self && self_queue_full((int)a2)) return ret(-EAGAIN);
      G* gp = shim::user_g();
      if (!gp || (int)a2 <= 0 || (pid_t)a1 != self) return ret(sys::raw3(nr, a1, a2, a3));
      return ret(self_sent(gp, (int)a2, nr, a1, a2, a3, 0));
    }
    case SYS_tgkill:
    case SYS_tkill: {
      long tgid = nr == SYS_tgkill ? a1 : kNoTgid, tid = nr == SYS_tgkill ? a2 : a1,
           sig = nr == SYS_tgkill ? a3 : a2;
      G* gp = shim::user_g();
      if (!to_own_thread(gp, tgid, tid, sig)) return ret(sys::raw6(nr, a1, a2, a3, a4, a5, a6));
      return ret(-signal_send(gp, (int)sig, nullptr));
    }
    case SYS_rt_tgsigqueueinfo: {
      G* gp = shim::user_g();
      if ((int)a1 <= 0 || !to_own_thread(gp, a1, a2, a3) || !a4) return ret(sys::raw4(nr, a1, a2, a3, a4));
      siginfo_t si;
      if (!user_in(&si, (const void*)a4, sizeof si)) return ret(-EFAULT);
      if (self_queue_full((int)a3)) return ret(-EAGAIN);
      // si_code and the rest of the caller's siginfo: goshim's SI_QUEUE.
      return ret(-signal_send(gp, (int)a3, &si.si_value));
    }
    case SYS_rt_sigaction: {
      if (a4 != 8) return ret(-EINVAL);
      if (!mn_active()) return ret(raw_sigaction(a1, (const kernel_sigaction*)a2, (kernel_sigaction*)a3));
      kernel_sigaction ka, ko;
      if (a2 && !user_in(&ka, (const void*)a2, sizeof ka)) return ret(-EFAULT);
      r = raw_sigaction(a1, a2 ? &ka : nullptr, a3 ? &ko : nullptr);
      if (r == 0 && a3 && !user_out((void*)a3, &ko, sizeof ko)) return ret(-EFAULT);
      return ret(r);
    }
    case SYS_rt_sigprocmask: {
      G* gp = mask_g();
      if (!gp) return ret(sys::raw4(nr, a1, a2, a3, a4));
      if (a4 != 8) return ret(-EINVAL);
      sigset_t set, old;
      uint64_t m;
      if (a2) {
        if (!user_in(&m, (const void*)a2, sizeof m)) return ret(-EFAULT);
        set_from_bits(&set, m);
      }
      int e = signal_setmask(gp, (int)a1, a2 ? &set : nullptr, &old);
      if (e) return ret(-e);
      m = bits(&old);
      if (a3 && !user_out((void*)a3, &m, sizeof m)) return ret(-EFAULT);
      return 0;
    }
    case SYS_rt_sigpending: {
      G* gp = shim::user_g();
      if (!gp) return ret(sys::raw2(nr, a1, a2));
      if ((unsigned long)a2 > 8) return ret(-EINVAL);
      sigset_t s;
      signal_pending_set(gp, &s);
      uint64_t m = bits(&s);
      if (!user_out((void*)a1, &m, (size_t)a2)) return ret(-EFAULT);
      return 0;
    }
    case SYS_rt_sigtimedwait: {
      if (!shim::user_g()) return ret(sys::raw4(nr, a1, a2, a3, a4));
      if (a4 != 8) return ret(-EINVAL);
      uint64_t m;
      struct timespec ts;
      if (!user_in(&m, (const void*)a1, sizeof m) || (a3 && !user_in(&ts, (const void*)a3, sizeof ts)))
        return ret(-EFAULT);
      sigset_t set;
      set_from_bits(&set, m);
      siginfo_t si;
      int s = sigtimedwait(&set, a2 ? &si : nullptr, a3 ? &ts : nullptr);
      if (s > 0 && a2 && !user_out((void*)a2, &si, sizeof si)) return ret(-EFAULT);
      return s;
    }
    case SYS_rt_sigsuspend: {
      if (!shim::user_g()) return ret(sys::raw2(nr, a1, a2));
      if (a2 != 8) return ret(-EINVAL);
      uint64_t m;
      if (!user_in(&m, (const void*)a1, sizeof m)) return ret(-EFAULT);
      sigset_t set;
      set_from_bits(&set, m);
      return sigsuspend(&set);
    }
    case SYS_sigaltstack: {
      if (!shim::user_g()) return ret(sys::raw2(nr, a1, a2));
      stack_t ss, os;
      if (a1 && !user_in(&ss, (const void*)a1, sizeof ss)) return ret(-EFAULT);
      int k = sigaltstack(a1 ? &ss : nullptr, a2 ? &os : nullptr);
      if (k == 0 && a2 && !user_out((void*)a2, &os, sizeof os)) return ret(-EFAULT);
      return k;
    }
    default:
      r = sys::raw6(nr, a1, a2, a3, a4, a5, a6);  // not routed here by the entry
      return ret(r);
  }
}

// tgkill (glibc >= 2.30 exports it: the bare system call): as
// syscall(SYS_tgkill) above.
GOSHIM_EXPORT int tgkill(pid_t tgid, pid_t tid, int sig) {
  return (int)goshim_syscall_signal(SYS_tgkill, tgid, tid, sig, 0, 0, 0);
}
