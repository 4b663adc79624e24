// Signals under M:N (DESIGN.md decision 11).
//
// The kernel delivers a signal to a kernel thread; the program means a
// thread, i.e. a goroutine. goshim keeps the program's view per G and
// installs one handler of its own (signal_handler) for every signal the
// program handles (and for every signal some G blocks whose default action
// is not "ignore"), so that it sees each delivery and can route it:
//
//   - on a user G that does not block it: the program's handler runs right
//     there (the M's kernel mask is the G's mask, applied lazily when the G
//     is scheduled);
//   - on a G that blocks it, if thread-directed (SI_TKILL): pending on that G;
//   - on g0, an idle M or sysmon (which keeps the program's handled signals
//     unblocked so that a signal never waits for a busy M, and those left at
//     their default action that some G blocks while another leaves them
//     open): recorded as process-pending (queued with its siginfo: standard
//     signals once, real-time ones every instance, as the kernel), and
//     sysmon routes it to a G that does not block it: a sigwaiter, a
//     running G (by forwarding the signal to its M), or a parked G, which
//     it wakes with EINTR semantics. If every G blocks it, it stays pending
//     until one unblocks it or sigwaits for it.
//   - thread-directed signals to a G that blocks them stay pending on it;
//     real-time instances queue there with their siginfo (the process's
//     pool of queued instances, limited by RLIMIT_SIGPENDING as the
//     kernel's queue).
//
// A G receives a signal pending on it at its next delivery point (return
// from a park or yield, any interposed call) by sending it to its own M,
// with the exact siginfo: the kernel then runs the handler on the G.
// pthread_kill targets a G the same way. Internal signals (SIGCANCEL 32,
// SIGSETXID 33, the preemption signal) are never blocked on an M.
#pragma once

#include <pthread.h>
#include <signal.h>

#include "core/gmp.hpp"

namespace goshim {

// Installs the routing machinery (runtime init).
void signal_init();

// Signal-safe. Sends sig to this process's kernel thread tid with value,
// as sigqueue from this process would (SI_QUEUE, our pid and uid): the
// one builder of such a siginfo. The raw system call's result.
long signal_send_queued(pid_t tid, int sig, union sigval value);

// Signal-safe. Whether the kernel, counting the instances goshim holds
// as natively it would, has room for one more queued signal of this
// process (RLIMIT_SIGPENDING against the user's count). A real-time
// signal the program queues to its own process through the kernel
// (sigqueue, pthread_sigqueue to a foreign thread) gets EAGAIN without
// it, as natively; true at once while goshim holds none (the kernel's own
// check is then exact).
bool signal_queue_room();

// sigaction for the program: records act, installs goshim's handler in the
// kernel as needed, reports the program's previous disposition in old.
// Returns 0 or -errno.
int signal_action(int sig, const struct sigaction* act, struct sigaction* old);
// Records a disposition set before the runtime started (or by the kernel).
void signal_record_action(int sig, const struct sigaction* act);
// The flags of the program's handler for sig (0 for SIG_DFL/SIG_IGN).
int signal_flags(int sig);
// Whether the program has a handler (not SIG_DFL/SIG_IGN) for sig.
bool signal_has_handler(int sig);

// The calling G's mask change (pthread_sigmask semantics). Returns 0 or an
// errno value. On user G.
// A longjmp/siglongjmp of the calling thread to env is about to happen
// (shim/signal_thread.cpp): the program signal handlers its target lies
// outside of are over (G::insig); then saved (the mask sigsetjmp saved, or
// nullptr) is set (signal_longjmp_mask) and what is due delivered. Returns
// whether it set saved (the jump must then restore none). Goroutines only.
bool signal_longjmp(const void* env, const sigset_t* saved);
// siglongjmp's restore of the mask sigsetjmp saved (glibc saves and sets
// it with its internal sigprocmask, which goshim does not see): the G's
// mask becomes saved, except for goshim's own signals (open in every
// kernel mask), whose program bits stay. Returns 0 or an errno.
int signal_longjmp_mask(G* gp, const sigset_t* saved);
int signal_setmask(G* gp, int how, const sigset_t* set, sigset_t* old);
// Applies gp's mask (and alternate signal stack) to the current M if they
// differ from what it has. On g0, before running gp.
void signal_apply(M* mp, G* gp);
// On g0 (or the stack of the G park's direct hand-off switched to, never
// gp's own), about to run gp (execute): signal_apply, except that when gp
// resumes on its own alternate stack every signal stays blocked (the
// caller's g0 would otherwise take a signal at that stack's top).
void signal_apply_resume(M* mp, G* gp);
// Signal context, on mp: whether this code runs on mp's alternate signal
// stack (a G's sigaltstack or mp's own, applied to mp).
bool signal_on_altstack(M* mp);
// Signal context: blocks every signal on mp's kernel thread (recorded, so
// that the next signal_apply or signal_m_sleep sets the mask again).
void signal_block_all(M* mp);
// On g0 (or on the next G's stack in a direct switch), before the G that
// ran is published (parked, queued or exited): mp keeps no G's alternate
// signal stack (its own again, M::sigstk). Once published, that G may run on another M at once, even
// on its alternate stack (a handler, or a frame it was preempted in), or
// exit and have the stack freed; a signal mp takes (the preemption signal
// is SA_ONSTACK) must not be pushed there.
void signal_leave_altstack(M* mp);

// The M's signal stack (signal.cpp, "The M's signal stack"). Allocates
// mp's own stack, with a guard (allocm; false without memory: mp then
// works as before, without one); installs it as the calling kernel
// thread's sigaltstack (mp's thread, on g0, at its start); uninstalls and
// frees it (mexit, on g0).
bool signal_m_stack_alloc(M* mp);
void signal_m_stack_install(M* mp);
void signal_m_stack_free(M* mp);
// Whether addr lies on mp's own signal stack. Signal-safe.
inline bool signal_on_m_stack(const M* mp, uintptr_t addr) {
  return addr - (uintptr_t)mp->sigstk.ss_sp < mp->sigstk.ss_size;
}

// The kernel mask a new M starts with, given the mask it inherited from
// the thread that created it (the G that started it, or sysmon): that mask
// with goshim's internal signals open, and, as an idle M's
// (signal_m_sleep_mask), every signal sysmon takes blocked until the M
// runs a goroutine: a second taker beside sysmon breaks the kernel's order
// of a real-time signal's instances. Like a new thread's, it keeps
// blocked what the program blocks: an M that took a signal every G blocks
// would hold it where the program's signalfd or sigwaitinfo cannot see it.
uint64_t signal_new_m_mask(uint64_t inherited);

// The kernel mask mp (the calling thread) may take for a wanted mask k:
// never one that blocks a signal forwarded to it and not yet arrived
// (signal.cpp, "Forwards"). Signal-safe.
uint64_t signal_kmask_for(M* mp, uint64_t k);

// Before an M sleeps without a G (idle, or in netpoll): it blocks the
// signals sysmon takes, which only sysmon may hold for the process while
// no G runs here (signal_g_exit waits for sysmon, not for every M); the
// next G's mask is applied when it runs (signal_apply). Without P or on g0.
void signal_m_sleep(M* mp);

// Around the creation of a kernel thread of goshim's (an M, sysmon): the
// new thread must start with every signal blocked but SIGSETXID, because
// until it has set tls_g a signal would run the program's handler there as
// on a foreign thread (and a process signal pending while no thread could
// take it is delivered to the first thread that opens it). Blocks them on
// the calling thread (the new thread inherits that mask) and returns the
// caller's mask, which signal_create_end puts back. Any thread.
uint64_t signal_create_begin();
void signal_create_end(uint64_t saved);
// The kernel mask such a thread starts with (every signal blocked but
// SIGSETXID): an M's record of its mask (M::cur_sigmask) until its thread
// sets its own, so that others (sysmon, wait_stale_ms) never count an M
// whose thread is not running yet as one that leaves signals open.
uint64_t signal_start_mask();

// pthread_kill / pthread_sigqueue to a G. Returns 0 or an errno value; 0
// without sending to a G that has exited (glibc's pthread_kill).
int signal_send(G* target, int sig, const union sigval* value);

// Delivers the signals pending on gp that it does not block (runs their
// handlers now, on gp). On user G.
void signal_deliver(G* gp);
// kill or sigqueue of sig by gp reached gp's own process, which the kernel
// accepted; handled0 is gp->nhandled before the call. POSIX: when gp does
// not block sig (and no other thread leaves it open), sig or another
// pending signal gp leaves open is delivered to gp before the call
// returns. The kernel gives it to gp's M on the way back from the call,
// unless another kernel thread that leaves it open took it first (sysmon,
// an idle M, the process's first thread); that one holds it for goshim,
// and gp takes it here. Not while the main G would take sig as the
// kernel's thread group leader (signal_leader_takes): the kernel wakes
// that thread, not the caller, and the instance goes to the main G. On
// user G, outside a handler.
void signal_sent_to_self(G* gp, int sig, uint32_t handled0);
// Whether gp has signals to deliver (cheap; the shim checks it inline).
inline bool signal_has_pending(G* gp) {
  return gp->sigpending.load(std::memory_order_relaxed) & ~gp->sigmask;
}

// The signals the kernel raises on the thread whose system call caused
// them (SIGPIPE for EPIPE, SIGXFSZ for EFBIG). While gp blocks one, its
// M's kernel mask blocks it too, and the instance stays pending on that
// kernel thread, where no wait of gp looks and whatever G the M runs next
// would get it.
constexpr uint64_t kSigRaisedByCall = (1ull << (SIGPIPE - 1)) | (1ull << (SIGXFSZ - 1));
// On gp, on the M that made the call: moves the raised signals of set
// (kSigRaisedByCall) that gp blocks and its M's kernel thread has pending
// onto gp, with the kernel's siginfo, as a pthread_kill to gp would queue
// them. Which instances are gp's:
// - RaisedNow: gp's write on this thread just failed with EPIPE or EFBIG
//   (without MSG_NOSIGNAL), so the thread's own instance is there;
// - otherwise only instances pending on the thread itself (read from
//   /proc: a kill() of the process looks the same). If /proc cannot be
//   read, RaisedMine (gp's sigpending or sigwait) takes them all, since
//   the writer is almost always gp itself; RaisedExit (gp exits) takes
//   none, since a process one it took would die with gp.
// A process-wide instance taken instead goes where sysmon would put it.
// kpending: the kernel's pending set of this thread if the caller just
// read it, or null. Holds no lock; costs a system call only when one of
// set is blocked.
enum class Raised { Now, Mine, Exit };
void signal_claim_raised(G* gp, uint64_t set, Raised how, const uint64_t* kpending = nullptr);
// sigpending for gp: what is pending on it, on its M and on the process.
void signal_pending_set(G* gp, sigset_t* out);
// Takes a signal of set pending on gp or on the process, if any (sigwait
// family). Returns the signal number and fills info, or 0. In the
// kernel's order: a held process signal waits while a lower one of set is
// still pending in the kernel or on its way into goshim; then -1, unless
// wait_kernel (gp's set is published, sysmon takes them): it waits for
// them here (bounded).
int signal_take(G* gp, uint64_t set, siginfo_t* info, bool wait_kernel);
// gp is about to wait for set in the kernel (sigwait family, sigsuspend,
// pause): route matching process signals to its M. 0 when done.
void signal_waiting(G* gp, uint64_t set);
// gp's sigwait ended (its set withdrawn, its signal taken): the process
// signals routed to it for that wait that it blocks go back to the process.
void signal_wait_done(G* gp);
// A signal of the set gp waits for was made pending on it: ends its wait on
// G::sigwait_word, or the one it is about to begin (the waiter reads the
// word before it publishes its set and looks for pending signals, and
// parks only if the word has not changed since). Takes sema locks.
void signal_wake_waiter(G* gp);

// On gp at its exit: process signals routed to it and not delivered go
// back to the process.
void signal_g_exit(G* gp);
// gp's mask counts from its creation (after its sigmask is set) until
// signal_g_exit; signal_g_gone once it no longer counts as a goroutine.
void signal_g_start(G* gp);
void signal_g_gone();

// In a forked child (the caller alone, before sysmon starts): as the
// kernel clears a new process's pending signals, forgets those goshim held
// for the parent and those pending on gp; sysmon recomputes its mask.
void signal_after_fork(G* gp, M* mp);

// sysmon: routes process-pending signals to goroutines. Without P.
void signal_route();
// Whether sysmon should wake early to route signals.
bool signal_route_pending();

// ---- The routing decisions, as functions of the state they read (unit
// tests drive them with fake Gs and Ms; the callers act on the result).

// signal_route's choice for a process-directed signal sig held by goshim.
// Fed the live Gs (main first, then the arena in slot order) until done():
// a G waiting for sig (its sigwaiting set: sigwait, sigsuspend) wins at
// once, even if it blocks sig; otherwise the first G on an M (Running, or
// in a blocking call) that does not block it; otherwise a parked or
// runnable G that does not block it (the last one found in an
// interruptible wait, WaitKind, else the first). Idle, dead, exiting and
// empty slots are skipped.
// Before the running and parked ones comes the main G (flag kGFlagMain)
// when it would take the signal natively (signal_leader_takes): the
// kernel gives a signal sent to the process (kill, alarm, sigqueue,
// mq_notify, AIO) to the thread group leader whenever that
// thread does not block it (complete_signal), so a program whose main
// thread waits in pause(), sleep() or read() for a SIGALRM or SIGINT that
// its busy workers leave open sees that wait end natively.
struct SigRoute {
  enum Kind : uint8_t {
    Pending,  // every G blocks it: it stays pending for the process
    Discard,  // no waiter and the program ignores it: dropped, as the kernel would
    Die,      // no waiter and its default action ends the process: sysmon takes it
    Later,    // a forward of sig to the chosen running G's M is in flight: next look
    Waiter,   // to the waiter, its wait ended
    Running,  // forwarded to the running G's M
    Parked,   // pending on a parked or runnable G, its wait interrupted
  };
  explicit SigRoute(int s) : sig(s), b(1ull << (s - 1)) {}
  void consider(G* g);
  bool done() const { return waiter != nullptr; }
  G* target() const { return waiter ? waiter : leader ? leader : running ? running : parked; }
  // Reads the program's disposition of sig and the running target's
  // M::sigfwd.
  Kind kind() const;
  int sig;
  uint64_t b;
  G* waiter = nullptr;
  G* leader = nullptr;  // the main G, which would take it natively
  G* running = nullptr;
  G* parked = nullptr;
};

// sysmon's kernel signal mask: open are the signals the program handles,
// those some G waits for (waited), and those goshim wraps or whose default
// action ends the process unless every live G blocks them (blocked_all).
// The other internal signals (SIGCANCEL, the preemption signal) stay
// blocked; SIGSETXID is always open.
uint64_t signal_sysmon_mask(uint64_t waited, uint64_t blocked_all);

// The kernel mask an M sleeping without a G takes (signal_m_sleep), from
// the one it has: also every signal sysmon takes (handled or wrapped),
// never the internal ones.
uint64_t signal_m_sleep_mask(uint64_t cur);

// What goshim's kernel-level handler does with signal sig the kernel
// delivered to the M on which gp runs (gp may be its g0). want: the G the
// signal was forwarded to this M for (M::sigfwd), or null; proc_fwd: that
// forward carries a process signal sysmon routed to want. Signal-safe.
enum class SigHere : uint8_t {
  ForOther,        // forwarded for a G that left this M: pending on want
  DieHere,         // a fault on g0: the default action, here
  Defer,           // held for the process: sysmon routes it to a G
  ProcFwdBlocked,  // a routed process signal gp blocks again: pending on gp if still claimed
  PendingOnG,      // thread-directed, gp blocks it: pending on gp (its sigwait ended)
  ProcFwdWaiting,  // a routed process signal reaching gp in its sigwait/sigsuspend window
  ThreadWaiting,   // a thread-directed one reaching gp there: pending on gp, its wait ended
  Run,             // the program's handler (or default action) runs on gp now
};
// leader: the main G (null: none to prefer). A signal sent to the
// process that the kernel gave the M of another G, while the main G
// would take it natively (signal_leader_takes), is held for sysmon to
// route to the main G (Defer) instead of running there.
SigHere signal_here(const G* gp, int sig, const siginfo_t* si, const G* want, bool proc_fwd,
                    const G* leader = nullptr);

// Whether the kernel would deliver process signal sig (siginfo si) to the
// thread group leader, the main G, rather than to the thread it hit: the
// signal is sent to the process as a whole (kill, sigqueue, alarm's
// SIGALRM, mq_notify, AIO completion: the kernel starts its choice at the
// leader; not a POSIX timer's, which Linux 6.4 and later give the thread
// the timer interrupted), and the main G is alive, not exiting, leaves sig
// open (or waits for it in sigwait/sigsuspend), has no other signal
// pending for it, and is running, runnable or in a wait a signal ends
// (WaitKind, sigwait/sigsuspend). Signals the kernel raises for the
// thread that caused them (SIGPIPE, SIGXFSZ: SI_USER from the process
// itself), SIGCHLD (sent to the parent thread) and SIGPROF/SIGVTALRM
// (to the thread that used the CPU) stay where they land. Signal-safe.
bool signal_leader_takes(const G* leader, int sig, const siginfo_t* si);

// After a wait of gp that began when G::nhandled was handled0 ended for a
// signal (interrupt_wait, or a handler that ran on gp before it parked):
// true if the call restarts under SA_RESTART, as the kernel decides. If
// program handlers ran on gp since, the call restarts only if each had
// SA_RESTART (the kernel goes by the first one it runs on the way out;
// goshim cannot tell which came first, and ends the call if any would
// have); if none ran, by the signal it was woken for (or the first still
// to deliver, signal_interrupt_lost). Consumes the interruption record.
// Every goroutine wait a signal ends decides here (futex, the sync waits,
// the fd layer's read/write/connect/splice waits); a restarted wait takes
// its handled0 again. The one rule for a wait made by any thread:
// signal_thread_restart_since.
bool signal_restart_since(G* gp, uint32_t handled0);
// After a wait of gp (the caller) was ended by interrupt_wait for a signal
// (WakeReason::Intr): true if that interruption came to nothing, i.e. no
// program handler ran on gp since handled0 (G::nhandled when the wait
// began) and gp has no signal left to deliver that it leaves open. Then the
// instance it was woken for was taken by another G (a process signal
// routed to gp whose held instance another thread's delivery took, as the
// kernel lets any thread that leaves it open dequeue it), or it was
// ignored: natively the woken thread finds nothing to handle and the
// kernel restarts the call, which never fails with EINTR without a handler
// having run on its thread. Consumes the interruption record when true.
// Not for pthread_cancel's interruption (no signal recorded).
bool signal_interrupt_lost(G* gp, uint32_t handled0);
// How many program handlers ran on the caller so far: on a goroutine its
// G::nhandled, on any other thread (foreign, or g0) a per-kernel-thread
// count. Any thread. A wait emulated with a call the kernel never restarts
// (poll) compares it across an EINTR to act as a blocking call.
uint32_t signal_thread_handled();
// Whether no program handler without SA_RESTART ran on the caller since
// signal_thread_handled() was handled0 (signal_restart_since's rule, for
// a wait the kernel ended: the caller compares the counts itself). Any
// thread.
bool signal_thread_restart_since(uint32_t handled0);
// True if every handler the program installed has SA_RESTART: in 1:1 mode
// (no routing handler counts what runs), a handler that interrupted a
// wait the kernel would have restarted had it. Any thread.
bool signal_handlers_all_restart();
// sigsuspend called by gp inside a program handler (where the shim passes
// calls to libc): runs real_suspend(mask) in the kernel, and meanwhile has
// thread-directed signals that mask opens forwarded to gp's M and run there
// even if gp's own mask (the interrupted code's plus the handler's
// sa_mask) blocks them (Boehm GC's suspend handler waits so for its
// restart signal).
int signal_ksuspend(G* gp, const sigset_t* mask, int (*real_suspend)(const sigset_t*));
// On the M that parks gp, once gp is Waiting and its unlockf committed the
// park: a signal gp leaves open that was made pending on it before it was
// Waiting (a forward taken mid-switch, on this thread) has sysmon end the
// wait, which nothing else would do (signal_route wakes only Waiting Gs).
void signal_parked(G* gp);
// Records that signal sig interrupts gp's wait (before interrupt_wait).
void signal_note_interrupt(G* gp, int sig);

// sigaltstack for a G: per goroutine, applied to the M that runs it.
int signal_altstack(G* gp, const stack_t* ss, stack_t* old);

// The default action of sig carried out by the kernel on the calling
// thread at once (its disposition set to SIG_DFL, the signal unblocked
// there, tgkill), as goshim does for a default action itself; returns
// only for a signal whose default action does not end the process. Any
// thread, signal-safe.
void signal_die_default(int sig);

// Cancellation (pthread_cancel) of a G, and the check at goshim's
// cancellation points: acts on the calling G's pending cancellation (does
// not return then).
int cancel_send(G* target);
void cancel_point();
bool cancel_pending(G* gp);
// Pending and of the asynchronous type: acted upon wherever gp runs
// (the cancellation signal, or gp's resumption after a preemption).
bool cancel_async_pending(G* gp);
// Whether gp's cancel type is asynchronous (only gp changes it).
bool cancel_async_type(G* gp);
// On gp itself, inside a blocking section (blocking_guarded): up to glibc
// 2.40, makes an asynchronous cancel type deferred for the libc call
// (G::guarded_async set first: pthread_cancel still counts gp as
// asynchronous) and returns true (then a full barrier: the call's entry
// check of the cancellation pairs with cancel_send's look at the status);
// restore puts it back.
bool cancel_async_suspend(G* gp);
void cancel_async_restore(G* gp);

// Any thread: acts on the calling thread's pending deferred cancellation,
// as a libc cancellation point does at entry: a goroutine's (cancel_point,
// also inside a program signal handler), or a kernel thread's through
// glibc. For goshim code that must act before it takes runtime state and
// then makes a call that is no cancellation point (fdop_close).
void cancel_point_any();

// Turns glibc's cancellation off for the calling thread (its TCB's
// cancelhandling, bit 0: PTHREAD_CANCEL_DISABLE) for the scope, and back on
// after if it was on. Inside it no libc function acts on a pending
// cancellation (glibc 2.41 acts on one in every cancellable system call
// whatever the type; every glibc acts at entry in deferred mode), nor do
// goshim's own cancellation points (cancel_pending), and pthread_cancel
// sends nothing (acted upon when enabled). For goshim code that calls libc
// functions which are cancellation points while it holds runtime state, or
// on behalf of a call that is no cancellation point. A cancellation sent
// meanwhile stays pending: the caller looks at it afterwards (an
// asynchronous one: cancel_async_pending after the scope). deferred_only:
// only when the thread's cancel type is deferred (an asynchronous
// cancellation may act anywhere, so a call that is no cancellation point
// need not hold it off). Signal-safe. Where the TCB's layout is not known
// (before init; a glibc goshim runs 1:1 only) it goes through glibc's
// pthread_setcancelstate.
struct CancelOff {
  int* ch = nullptr;
  bool glibc_state = false;  // turned off through pthread_setcancelstate
  explicit CancelOff(bool deferred_only = false);
  ~CancelOff() {
    if (ch) __atomic_fetch_and(ch, ~1, __ATOMIC_ACQ_REL);
    if (__builtin_expect(glibc_state, 0)) pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, nullptr);
  }
  CancelOff(const CancelOff&) = delete;
  CancelOff& operator=(const CancelOff&) = delete;
};

}  // namespace goshim
