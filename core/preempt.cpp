// Asynchronous preemption (see preempt.hpp).
#include "core/preempt.hpp"
#include "arch/arch.hpp"
#include "core/rtlock.hpp"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <sys/ucontext.h>
#include <ucontext.h>
#include <unistd.h>

#include <new>

#include "core/config.hpp"
#include "core/contract.hpp"
#include "core/rawlog.hpp"
#include "core/dump.hpp"
#include "core/sched.hpp"
#include "core/signal.hpp"
#include "core/tls.hpp"
#include "core/trace.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

constexpr int kPreemptMagic = 0x676f7072;  // "gopr" in si_value: yield
constexpr int kKickMagic = 0x676f6b69;     // "goki": deliver pending signals
constexpr int kCancelMagic = 0x676f6361;   // "goca": asynchronous cancellation
constexpr int kDumpMagic = 0x676f6475;     // "godu": record a backtrace for a dump

// Text ranges that must not be preempted. Written under ranges_lock by
// init and dlopen, read lock-free by the signal handler.
struct Range {
  uintptr_t lo, hi;
};
constexpr int kMaxRanges = 32;
Range ranges[kMaxRanges];
std::atomic<int> nranges{0};
Mutex ranges_lock{LockRank::PreemptRanges};

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

// The interrupted code runs on the G's own stack (not on an alternate
// signal stack, which belongs to the M, inside some handler).
bool on_own_stack(G* gp, ucontext_t* uc) {
  uintptr_t sp = arch::uc_sp(uc);
  return gp->stack.hi && sp > gp->stack.lo && sp <= gp->stack.hi;
}

// Whether a preemption request reaching gp's M at uc finds a safe point.
// Signal context.
bool preempt_safe_point(G* gp, ucontext_t* uc) {
  M* mp = gp->m;
  return !gp->is_g0() && mp && mp->curg == gp &&
         gp->status.load(std::memory_order_relaxed) == GStatus::Running && gp->insig == 0 &&
         gp->preempt.load(std::memory_order_relaxed) && !pc_unsafe(arch::uc_pc(uc)) &&
         on_own_stack(gp, uc);
}

bool send_magic(G* target, int magic);

// Signal context, on gp's M (the current thread), after a switch: kicks
// this M so that gp's pending signals (cancel: its asynchronous
// cancellation) are acted on once this handler has returned, in a frame
// of their own pushed where the kernel would push one, not deeper in this
// one. The preemption signal stays blocked here until rt_sigreturn. If
// the kick cannot be sent, gp acts at its next interposed call.
void kick_self_after(G* gp, int magic) {
  uint64_t b = 1ull << (config.preempt_signal - 1);
  sys::rt_sigprocmask(SIG_BLOCK, &b, nullptr, 8);
  if (!send_magic(gp, magic)) gp->preempt.store(true, std::memory_order_release);
}

// A preemption request reached gp's M: switch gp out here if this is a
// safe point. Signal context.
bool async_preempt(G* gp, ucontext_t* uc, bool stuck) {
  M* mp = gp->m;
  if (mp) mp->preempt_sent.store(false, std::memory_order_release);
  // Not here (or the frame is stuck on the M's signal stack): the next
  // interposed call yields.
  if (stuck || !preempt_safe_point(gp, uc)) return false;
  GOSHIM_DCHECK(!signal_on_m_stack(mp, arch::get_sp()) && !signal_on_m_stack(mp, (uintptr_t)uc),
                "async_preempt: switching out on the M's signal stack");
  // A safe point. The kernel saved every register (and the xsave area)
  // in uc on this G's stack. Let the M run other Gs with the signal mask
  // the G had, park the G on the global queue from inside this frame, and
  // return (on whatever M resumes it) through rt_sigreturn.
  //
  // The frame is on the G's stack (moved there from the M's signal stack)
  // or on the G's own alternate signal stack (the preemption signal is
  // SA_ONSTACK). It stays the G's while the G is switched out,
  // but this M's kernel thread keeps that stack installed until its
  // scheduler loop drops it (signal_leave_altstack): until then no signal
  // may be taken here, or its frame would be pushed over this one (the G
  // may be running again on another M by then).
  if (signal_on_altstack(mp))
    signal_block_all(mp);
  else
    sys::rt_sigprocmask(SIG_SETMASK, &uc->uc_sigmask, nullptr, 8);
  gp->preempt.store(false, std::memory_order_relaxed);
  sched.npreempt.fetch_add(1, std::memory_order_relaxed);
  trace_ev(TraceEv::Preempt, gp, gp->goid);
  trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Preempt);
  gosched_global();
  // Possibly another M now: rt_sigreturn restores the signal mask and the
  // alternate signal stack from the frame; the mask is the G's own, the
  // alternate stack must be this M's.
  M* now = gp->m;
  uc->uc_stack = now->cur_altstack;
  if (uc->uc_stack.ss_flags & SS_DISABLE) uc->uc_stack = stack_t{nullptr, SS_DISABLE, 0};
  uint64_t k;
  memcpy(&k, &uc->uc_sigmask, sizeof k);
  // Never a mask that blocks a forward in flight to this M (signal.cpp).
  k = signal_kmask_for(now, k);
  memcpy(&uc->uc_sigmask, &k, sizeof k);
  __atomic_store_n(&now->cur_sigmask, k, __ATOMIC_RELEASE);
  // Signals pending on gp, and an asynchronous cancellation pthread_cancel
  // may have missed while it was switched out: acted on after rt_sigreturn
  // (kick_self_after), where the kernel would have pushed their frames, not
  // below this frame (the G may have had just room for this one).
  if (__builtin_expect(cancel_async_pending(gp), 0))
    kick_self_after(gp, kCancelMagic);
  else if (signal_has_pending(gp))
    kick_self_after(gp, kKickMagic);
  return true;
}

// Whether a delivery of the preemption signal finds signals pending on gp
// that it may deliver where gp runs (as a delivery kick does).
bool deliver_due(G* gp) {
  return gp->status.load(std::memory_order_relaxed) != GStatus::Idle && !gp->insig &&
         !__atomic_load_n(&gp->delivering, __ATOMIC_RELAXED) && signal_has_pending(gp);
}

}  // namespace

bool async_cancel_safe(G* gp, void* uctx) {
  GOSHIM_SIGNAL_SAFE();  // signal handlers call it
  M* mp = gp->m;
  bool safe = false;
  if (gp->insig == 0 && mp && mp->curg == gp && mp->locks.load(std::memory_order_relaxed) == 0) {
    uintptr_t pc = arch::uc_pc((ucontext_t*)uctx);
    if (dladdr_is_self(pc))
      safe = false;  // goshim's own code
    else if (!pc_unsafe(pc))
      safe = true;  // the program's own code
    else
      safe = dump_program_frame_first(gp, uctx);  // libc, the vDSO: called by whom?
  }
  // Not here: the G yields, and acts on it, at its next interposed call
  // from the program's own code (preempt_at_call); its goshim waits are
  // cancellation points meanwhile, and sysmon's preemption finds it in
  // the program's code if it computes.
  if (!safe) gp->preempt.store(true, std::memory_order_release);
  return safe;
}

bool handler_cancel_safe(G* gp, void* uctx) {
  GOSHIM_SIGNAL_SAFE();
  M* mp = gp->m;
  if (gp->insig == 0 || !mp || mp->curg != gp || mp->locks.load(std::memory_order_relaxed) != 0)
    return false;
  uintptr_t pc = arch::uc_pc((ucontext_t*)uctx);
  if (dladdr_is_self(pc)) return false;
  return !pc_unsafe(pc) || dump_program_frame_first(gp, uctx);
}

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

void preempt_init() { preempt_refresh_ranges(); }

void preempt_after_fork() { ranges_lock.reset(); }

namespace {
// goshim's own tag on a delivery of the preemption signal, or 0.
int own_magic(const siginfo_t* si) {
  if (!si || si->si_code != SI_QUEUE || si->si_pid != (pid_t)sys::getpid()) return 0;
  int magic = si->si_value.sival_int;
  if (magic != kPreemptMagic && magic != kKickMagic && magic != kCancelMagic && magic != kDumpMagic)
    return 0;
  return magic;
}

// Kicks without their siginfo. goshim tells its own deliveries of the
// preemption signal from the program's by their siginfo (own_magic). The
// kernel delivers a standard signal without it when it cannot queue one
// (the user's RLIMIT_SIGPENDING count reached, or no memory): SI_USER from
// pid 0, the sender unknown. Taken for the program's signal, such a kick
// ran the program's SIGURG handler on whatever G the M ran, on several
// threads at once (tests/preload/sigstack_handler_block hung so, its
// handlers blocked in read() on the writer, on main, on the wrong worker).
// So each sender counts its kind on the target M first (M::magic_sent),
// and every delivery of goshim's takes exactly one count there: one with
// its siginfo one of its kind (or, if an earlier one without took that,
// of another kind), one without the first kind counted, whose action it
// takes (a preemption request also delivers what is pending, as a kick).
// Deliveries never outnumber sends (the kernel merges a standard signal's
// sends into one), so one without siginfo always finds a count. (Taking
// every kind's count at once, a send counted before the handler ran but
// still on its way arrived without one, for the program: several times a
// run with the queue full, tests/preload/signals_kill_exact.) A count a
// merged send left behind only makes a later delivery without siginfo on
// that M goshim's: never the program's signal run where it was not sent.
constexpr int kMagics[4] = {kPreemptMagic, kKickMagic, kCancelMagic, kDumpMagic};
constexpr uint32_t kPreemptBit = 1, kKickBit = 2, kCancelBit = 4, kDumpBit = 8;
// Signal-safe. Takes one of counter c's counts: whether there was one.
bool take_one(std::atomic<uint32_t>& c) {
  uint32_t v = c.load(std::memory_order_seq_cst);
  while (v && !c.compare_exchange_weak(v, v - 1, std::memory_order_seq_cst)) {
  }
  return v != 0;
}
int magic_index(int magic) {
  for (int i = 0; i < 4; i++)
    if (kMagics[i] == magic) return i;
  return -1;
}
// Signal-safe. Before a send of magic to mp.
void magic_note(M* mp, int magic) {
  int i = magic_index(magic);
  if (i >= 0) mp->magic_sent[i].fetch_add(1, std::memory_order_seq_cst);
}
// Signal-safe. After a send of magic to mp that the kernel refused.
void magic_unnote(M* mp, int magic) {
  int i = magic_index(magic);
  if (i >= 0) take_one(mp->magic_sent[i]);
}
// Signal-safe. The kind (k*Bit) a delivery of the preemption signal with
// si is on mp (the receiving M, or null), 0 if it is not goshim's; take:
// this is that delivery (it takes its count).
uint32_t magic_kinds(const siginfo_t* si, M* mp, bool take) {
  if (int magic = own_magic(si)) {
    int i = magic_index(magic);
    if (take && mp && !take_one(mp->magic_sent[i]))
      for (int j = 0; j < 4 && !take_one(mp->magic_sent[j]); j++) {
      }
    return 1u << i;
  }
  if (!mp || !si || si->si_code != SI_USER || si->si_pid != 0) return 0;
  for (int i = 0; i < 4; i++)
    if (take ? take_one(mp->magic_sent[i]) : mp->magic_sent[i].load(std::memory_order_seq_cst) != 0)
      return 1u << i;
  return 0;
}
// The frame move one kind of goshim's delivery wants.
PreemptMove move_for(int magic, G* gp, void* uctx) {
  ucontext_t* uc = (ucontext_t*)uctx;
  switch (magic) {
    case kPreemptMagic:
      if (cancel_async_pending(gp) && async_cancel_safe(gp, uctx)) return PreemptMove::Move;
      if (preempt_safe_point(gp, uc)) return PreemptMove::MoveOwnStack;
      return deliver_due(gp) ? PreemptMove::Move : PreemptMove::Stay;
    case kKickMagic:
      return deliver_due(gp) ? PreemptMove::Move : PreemptMove::Stay;
    case kCancelMagic:
      return cancel_async_pending(gp) && async_cancel_safe(gp, uctx) ? PreemptMove::Move
                                                                     : PreemptMove::Stay;
    default:
      return PreemptMove::Stay;
  }
}

}  // namespace

PreemptMove preempt_move_wanted(siginfo_t* si, void* uctx, G* gp) {
  uint32_t kinds = magic_kinds(si, gp ? gp->m : nullptr, false);
  if (!kinds) return PreemptMove::NotOurs;
  return move_for(kMagics[__builtin_ctz(kinds)], gp, uctx);
}

bool preempt_on_signal(siginfo_t* si, void* uctx, bool stuck) {
  G* gp = tls_g;
  uint32_t kinds = magic_kinds(si, gp ? gp->m : nullptr, true);
  if (!kinds) return false;
  // A preemption request that finds the M between Gs (on g0) is spent all
  // the same: the next one must be sent.
  if ((kinds & kPreemptBit) && gp && gp->m)
    gp->m->preempt_sent.store(false, std::memory_order_release);
  if (!gp || gp->is_g0()) return true;
  if (kinds & kDumpBit) {
    gp->insig++;  // libc calls made while unwinding go straight to libc
    dump_capture_running(gp, uctx);
    gp->insig--;
  }
  if (kinds & kPreemptBit) {
    // An asynchronous cancellation sent while this G waited for a P
    // (pthread_cancel kicks only a running G): act on it now, if the
    // G may be unwound from here.
    if (cancel_async_pending(gp) && async_cancel_safe(gp, uctx)) {
      if (M* mp = gp->m) mp->preempt_sent.store(false, std::memory_order_release);
      if (stuck) {  // not from the M's signal stack: at its next interposed call
        gp->preempt.store(true, std::memory_order_release);
        return true;
      }
      cancel_point();  // unwinds: never returns
      return true;
    }
    // Not switched out: signals pending on gp are delivered here, as a
    // kick would (a kick sent while this request was pending in the
    // kernel merged with it: the signal is a standard one).
    if (!async_preempt(gp, (ucontext_t*)uctx, stuck) && !stuck && deliver_due(gp))
      signal_deliver(gp);
    return true;
  }
  if (kinds & kCancelBit) {  // asynchronous cancellation
    // The kick may reach another G than the one it was sent for (the
    // target moved): only an asynchronous cancellation of this G, and
    // only where it may be unwound (async_cancel_safe); else it acts at
    // its next safe point.
    if (cancel_async_pending(gp) && async_cancel_safe(gp, uctx)) {
      if (stuck) {
        gp->preempt.store(true, std::memory_order_release);
        return true;
      }
      cancel_point();
    }
  }
  if (kinds & kKickBit) {  // signals are pending on gp: deliver them where it runs
    // (From the M's signal stack: at its next delivery point instead.)
    if (!stuck && deliver_due(gp)) signal_deliver(gp);
  }
  return true;
}

namespace {
// Signal-safe. Sends goshim's preemption signal carrying magic to mp's
// kernel thread, counted on mp first (magic_note) so that a delivery the
// kernel makes without siginfo still finds its kind; a send the kernel
// refused takes its count back. Whether it was sent.
bool send_magic_m(M* mp, int magic) {
  int sig = config.preempt_signal;
  if (!mp || mp->tid <= 0 || !sig) return false;
  magic_note(mp, magic);
  union sigval v = {};
  v.sival_int = magic;
  if (signal_send_queued(mp->tid, sig, v) == 0) return true;
  magic_unnote(mp, magic);
  return false;
}
bool send_magic(G* target, int magic) { return send_magic_m(target->m, magic); }
}  // namespace

void preempt_dump_kick(G* target) { send_magic(target, kDumpMagic); }

void preempt_kick(G* target, bool cancel) {
  send_magic(target, cancel ? kCancelMagic : kKickMagic);
}

void preemptone(P* pp) {
  M* mp = pp->m;
  if (!mp) return;
  G* gp = mp->curg;
  if (!gp || gp->is_g0()) return;
  gp->preempt.store(true, std::memory_order_release);
  pp->preempt.store(true, std::memory_order_relaxed);
  // A G in a program signal handler is not preempted there (async_preempt):
  // the signal would only end the handler's system call (poll, a sleep)
  // with EINTR. It yields at its next interposed call after the handler.
  if (__atomic_load_n(&gp->insig, __ATOMIC_RELAXED) > 0) return;
  if (!config.preempt_signal || mp->tid <= 0) return;
  // One in flight at a time; one that has not arrived for 50 ms is lost.
  int64_t now = sys::nanotime();
  if (mp->preempt_sent.exchange(true, std::memory_order_acq_rel) &&
      now - mp->preempt_sent_at < 50 * 1000000)
    return;
  mp->preempt_sent_at = now;
  if (!send_magic_m(mp, kPreemptMagic)) mp->preempt_sent.store(false, std::memory_order_release);
}

void preempt_at_call(G* gp, const void* caller_pc) {
  GOSHIM_ON_USER_G();
  // Only from the program's own code: a call made from inside libc (say,
  // write() called by printf while it holds stdout's lock) must not park.
  if (pc_unsafe((uintptr_t)caller_pc)) return;
  M* mp = gp->m;
  if (!mp || mp->locks.load(std::memory_order_relaxed) > 0) return;
  gp->preempt.store(false, std::memory_order_relaxed);
  // An asynchronous cancellation that found gp where it could not be
  // unwound (async_cancel_safe): the program's call into goshim is a place
  // where it can.
  if (__builtin_expect(cancel_async_pending(gp), 0)) cancel_point();
  if (gp->rt_pending.load(std::memory_order_relaxed)) {
    rt_pending_apply(gp);  // another G gave this one a real-time policy
    if (gp->rt_locked) return;
  }
  sched.npreempt.fetch_add(1, std::memory_order_relaxed);
  trace_ev(TraceEv::Preempt, gp, gp->goid);
  trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Preempt);
  gosched_global();
}

}  // namespace goshim
