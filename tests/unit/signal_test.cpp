// The routing tables of signals (core/signal.cpp), as the pure functions
// the runtime acts on:
//   - SigRoute: which G sysmon gives a process-directed signal goshim holds
//     (a sigwait/sigsuspend waiter, else a G on an M that does not block
//     it, else a parked or runnable one; blocked everywhere: it stays
//     pending; ignored: discarded; left at a default action that ends the
//     process: sysmon takes it; a forward still in flight to the chosen M:
//     the next look);
//   - signal_here: what goshim's kernel-level handler does with a signal
//     the kernel gave an M (run it on the G there, hold it for sysmon, leave
//     it pending on a G, end a sigwait/sigsuspend window, hand a forward to
//     the G it was for);
//   - the kernel masks: sysmon's (signal_sysmon_mask), an idle M's
//     (signal_m_sleep_mask), a new M's (signal_new_m_mask), and the rule
//     that an M never blocks a signal forwarded to it and not yet arrived
//     (signal_kmask_for, M::fwd_bits).
// Fake Gs and Ms that never run; the program's dispositions are recorded
// with signal_record_action, as the shim's sigaction does. Each Test runs
// in its own process (Criterion), so dispositions do not leak between them.
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <new>

#include "core/config.hpp"
#include "core/gmp.hpp"
#include "core/signal.hpp"

using namespace goshim;

namespace {

uint64_t bit(int sig) { return 1ull << (sig - 1); }

template <class T>
T* make() {
  return new (aligned_alloc(64, (sizeof(T) + 63) & ~size_t{63})) T();
}

G* g_(GStatus st, uint64_t mask = 0, uint64_t waiting = 0, WaitKind wk = WaitKind::None) {
  static uint64_t ids;
  G* gp = make<G>();
  gp->goid = ++ids;
  gp->magic = kGMagic;
  gp->status.store(st);
  gp->sigmask = mask;
  gp->sigwaiting.store(waiting);
  gp->wait_kind.store(wk);
  return gp;
}

void handler(int) {}

void dispose(int sig, void (*h)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = h;
  signal_record_action(sig, &sa);
}
void set_handler(int sig) { dispose(sig, handler); }
void set_default(int sig) { dispose(sig, SIG_DFL); }
void set_ignore(int sig) { dispose(sig, SIG_IGN); }

// signal_route's loop: main first, then the others, until a waiter.
SigRoute route(int sig, std::initializer_list<G*> gs) {
  SigRoute r(sig);
  for (G* g : gs) {
    if (r.done()) break;
    r.consider(g);
  }
  return r;
}

}  // namespace

TestSuite(signal, .timeout = 30);

// ---- sysmon's choice of a G for a process-directed signal -------------------------

// A G waiting for the signal (sigwait, sigsuspend) takes it before any
// running or parked G, even though it blocks it (sigwait's contract); the
// first waiter found wins and ends the search.
Test(signal, route_waiter_first_even_if_it_blocks_the_signal) {
  set_handler(SIGUSR1);
  G* run = g_(GStatus::Running);
  G* park = g_(GStatus::Waiting, 0, 0, WaitKind::Sema);
  G* w1 = g_(GStatus::Waiting, bit(SIGUSR1), bit(SIGUSR1));
  G* w2 = g_(GStatus::Waiting, 0, bit(SIGUSR1) | bit(SIGUSR2));
  SigRoute r = route(SIGUSR1, {run, park, w1, w2});
  cr_assert(r.done());
  cr_assert_eq(r.target(), w1);
  cr_assert_eq(r.kind(), SigRoute::Waiter);
  // A waiter for another signal is not one for this.
  G* other = g_(GStatus::Waiting, bit(SIGUSR1), bit(SIGUSR2));
  r = route(SIGUSR1, {other, run});
  cr_assert_eq(r.target(), run);
  cr_assert_eq(r.kind(), SigRoute::Running);
  // A G in sigwait that is running (not parked yet) is a waiter too.
  G* entering = g_(GStatus::Running, bit(SIGUSR1), bit(SIGUSR1));
  r = route(SIGUSR1, {run, entering});
  cr_assert_eq(r.target(), entering);
  cr_assert_eq(r.kind(), SigRoute::Waiter);
}

// No waiter: the first G on an M (running, or in a blocking call) that
// does not block it, before any parked or runnable one.
Test(signal, route_running_before_parked_masks_respected) {
  set_handler(SIGUSR2);
  G* blocks = g_(GStatus::Running, bit(SIGUSR2));
  G* parked = g_(GStatus::Waiting, 0, 0, WaitKind::Netpoll);
  G* sys = g_(GStatus::Syscall);
  G* run = g_(GStatus::Running);
  SigRoute r = route(SIGUSR2, {blocks, parked, sys, run});
  cr_assert(!r.done());
  cr_assert_eq(r.target(), sys, "the first one on an M that leaves it open");
  cr_assert_eq(r.kind(), SigRoute::Running);
  // Blocking another signal does not matter.
  G* blocks_other = g_(GStatus::Running, bit(SIGUSR1));
  cr_assert_eq(route(SIGUSR2, {blocks_other}).target(), blocks_other);
}

// The main G (kGFlagMain, fed first) takes it before the running and
// parked ones whenever the kernel would give it to the thread group
// leader: it leaves the signal open, is not exiting, has no other signal
// pending, and is running, runnable or in a wait a signal ends. A waiter
// still comes first.
Test(signal, route_main_first_when_it_would_take_it) {
  set_handler(SIGUSR1);
  auto main_ = [](GStatus st, uint64_t mask = 0, WaitKind wk = WaitKind::None) {
    G* g = g_(st, mask, 0, wk);
    g->flags = kGFlagMain;
    return g;
  };
  G* run = g_(GStatus::Running);
  G* m = main_(GStatus::Waiting, 0, WaitKind::Sleep);
  SigRoute r = route(SIGUSR1, {m, run});
  cr_assert_eq(r.target(), m, "main asleep in nanosleep, a worker running");
  cr_assert_eq(r.kind(), SigRoute::Parked);
  m = main_(GStatus::Running);
  r = route(SIGUSR1, {m, run});
  cr_assert_eq(r.target(), m);
  cr_assert_eq(r.kind(), SigRoute::Running);
  m = main_(GStatus::Runnable);
  cr_assert_eq(route(SIGUSR1, {m, run}).target(), m);
  // Not when it blocks it, waits where a signal cannot end the wait
  // (pthread_join), has another signal pending, or is exiting.
  m = main_(GStatus::Waiting, bit(SIGUSR1), WaitKind::Sleep);
  cr_assert_eq(route(SIGUSR1, {m, run}).target(), run, "main blocks it");
  m = main_(GStatus::Waiting, 0, WaitKind::None);
  cr_assert_eq(route(SIGUSR1, {m, run}).target(), run, "main in pthread_join");
  m = main_(GStatus::Waiting, 0, WaitKind::Sema);
  m->sigpending.store(bit(SIGUSR2));
  cr_assert_eq(route(SIGUSR1, {m, run}).target(), run, "main has SIGUSR2 to handle");
  m->sigpending.store(bit(SIGUSR1));
  cr_assert_eq(route(SIGUSR1, {m, run}).target(), m, "the same signal pending on main merges there");
  m = main_(GStatus::Running);
  m->sig_exiting.store(true);
  cr_assert_eq(route(SIGUSR1, {m, run}).target(), run, "main exiting");
  // A G that is not main is no leader.
  G* first = g_(GStatus::Waiting, 0, 0, WaitKind::Sleep);
  cr_assert_eq(route(SIGUSR1, {first, run}).target(), run);
  // A waiter wins.
  m = main_(GStatus::Running);
  G* w = g_(GStatus::Waiting, bit(SIGUSR1), bit(SIGUSR1));
  r = route(SIGUSR1, {m, run, w});
  cr_assert_eq(r.target(), w);
  cr_assert_eq(r.kind(), SigRoute::Waiter);
}

// Nobody on an M: a parked or runnable G; one in an interruptible wait
// (the signal can end its wait with EINTR) is preferred, the last such one
// found; without one, the first candidate.
Test(signal, route_parked_prefers_an_interruptible_wait) {
  set_handler(SIGUSR1);
  G* runnable = g_(GStatus::Runnable);
  G* join = g_(GStatus::Waiting, 0, 0, WaitKind::None);
  G* sema = g_(GStatus::Waiting, 0, 0, WaitKind::Sema);
  G* sleep = g_(GStatus::Waiting, 0, 0, WaitKind::Sleep);
  SigRoute r = route(SIGUSR1, {runnable, join, sema, sleep});
  cr_assert_eq(r.target(), sleep);
  cr_assert_eq(r.kind(), SigRoute::Parked);
  r = route(SIGUSR1, {runnable, join});
  cr_assert_eq(r.target(), runnable, "no interruptible wait: the first");
  r = route(SIGUSR1, {join, runnable});
  cr_assert_eq(r.target(), join);
  // A G in an interruptible wait that blocks the signal is no candidate.
  G* masked = g_(GStatus::Waiting, bit(SIGUSR1), 0, WaitKind::Sema);
  r = route(SIGUSR1, {join, masked});
  cr_assert_eq(r.target(), join);
}

// Blocked by every G (and nobody waits for it): no target, it stays
// pending for the process until a G unblocks it or waits for it, whatever
// its disposition.
Test(signal, route_blocked_everywhere_stays_pending) {
  set_handler(SIGUSR1);
  uint64_t m = bit(SIGUSR1);
  SigRoute r = route(SIGUSR1, {g_(GStatus::Running, m), g_(GStatus::Waiting, m, 0, WaitKind::Sema),
                               g_(GStatus::Runnable, m), g_(GStatus::Syscall, m)});
  cr_assert_null(r.target());
  cr_assert_eq(r.kind(), SigRoute::Pending);
  set_default(SIGTERM);
  r = route(SIGTERM, {g_(GStatus::Running, bit(SIGTERM))});
  cr_assert_eq(r.kind(), SigRoute::Pending, "nothing to die for while every G blocks it");
  set_ignore(SIGUSR2);
  r = route(SIGUSR2, {g_(GStatus::Running, bit(SIGUSR2))});
  cr_assert_eq(r.kind(), SigRoute::Pending, "a blocked signal is never discarded");
}

// Slots that are not live goroutines never get a signal: free (Idle),
// exited (Dead), exiting (they give back what they hold themselves), and
// slots without a G.
Test(signal, route_idle_dead_exiting_and_empty_slots_skipped) {
  set_handler(SIGUSR1);
  G* idle = g_(GStatus::Idle);
  G* dead = g_(GStatus::Dead);
  G* exiting = g_(GStatus::Running);
  exiting->sig_exiting.store(true);
  G* exiting_waiter = g_(GStatus::Running, 0, bit(SIGUSR1));
  exiting_waiter->sig_exiting.store(true);
  G* empty = g_(GStatus::Running);
  empty->magic = 0;
  G* waiting_dead = g_(GStatus::Dead, 0, bit(SIGUSR1));
  SigRoute r = route(SIGUSR1, {idle, dead, exiting, exiting_waiter, empty, waiting_dead});
  cr_assert_eq(r.kind(), SigRoute::Pending);
  G* ok = g_(GStatus::Waiting, 0, 0, WaitKind::None);
  r = route(SIGUSR1, {idle, dead, exiting, exiting_waiter, empty, waiting_dead, ok});
  cr_assert_eq(r.target(), ok);
  cr_assert_eq(r.kind(), SigRoute::Parked);
}

// The program's disposition: a signal left at a default action that ends
// the process is taken by sysmon itself (routing it to a G would wait for
// that G to run) unless a G waits for it; one with a handler, or ignored
// by default, goes to a G.
Test(signal, route_default_action_that_ends_the_process_dies_in_sysmon) {
  set_default(SIGTERM);
  G* run = g_(GStatus::Running);
  cr_assert_eq(route(SIGTERM, {run}).kind(), SigRoute::Die);
  cr_assert_eq(route(SIGTERM, {g_(GStatus::Waiting, 0, 0, WaitKind::Sema)}).kind(), SigRoute::Die);
  set_default(SIGRTMIN + 3);
  cr_assert_eq(route(SIGRTMIN + 3, {run}).kind(), SigRoute::Die, "real-time: ends the process");
  G* w = g_(GStatus::Waiting, bit(SIGTERM), bit(SIGTERM));
  SigRoute r = route(SIGTERM, {run, w});
  cr_assert_eq(r.kind(), SigRoute::Waiter, "sigwait takes it");
  cr_assert_eq(r.target(), w);
  set_handler(SIGTERM);
  cr_assert_eq(route(SIGTERM, {run}).kind(), SigRoute::Running, "the program handles it");
  // Stop signals do not end the process.
  set_default(SIGTSTP);
  cr_assert_eq(route(SIGTSTP, {run}).kind(), SigRoute::Running);
}

// Ignored (SIG_IGN, or a default action that ignores it): some G leaves it
// open, so the kernel would have discarded it; goshim drops it rather than
// interrupting a G, unless a G waits for it in sigwait (natively a blocked
// signal is never discarded, and the waiter takes it).
Test(signal, route_ignored_is_discarded_unless_waited_for) {
  G* run = g_(GStatus::Running);
  G* park = g_(GStatus::Waiting, 0, 0, WaitKind::Sema);
  set_ignore(SIGUSR1);
  cr_assert_eq(route(SIGUSR1, {run}).kind(), SigRoute::Discard);
  cr_assert_eq(route(SIGUSR1, {park}).kind(), SigRoute::Discard, "never a reason to interrupt a wait");
  G* w = g_(GStatus::Waiting, bit(SIGUSR1), bit(SIGUSR1));
  SigRoute r = route(SIGUSR1, {run, w});
  cr_assert_eq(r.kind(), SigRoute::Waiter);
  cr_assert_eq(r.target(), w);
  // Ignored by default: SIGCHLD, SIGWINCH, SIGURG, SIGCONT.
  for (int sig : {SIGCHLD, SIGWINCH, SIGURG, SIGCONT}) {
    set_default(sig);
    cr_assert_eq(route(sig, {run}).kind(), SigRoute::Discard, "signal %d", sig);
    G* ww = g_(GStatus::Waiting, bit(sig), bit(sig));
    cr_assert_eq(route(sig, {park, ww}).kind(), SigRoute::Waiter, "signal %d waited for", sig);
  }
  // A handler installed again: routed.
  set_handler(SIGUSR1);
  cr_assert_eq(route(SIGUSR1, {run}).kind(), SigRoute::Running);
}

// A forward of the same signal still in flight to the running G's M
// (M::sigfwd marked, the tgkill not arrived): the next instance waits for
// sysmon's next look, so that the mark is not overwritten. A mark for
// another signal, or on another M, does not matter; nor does it for a
// waiter or a parked G.
Test(signal, route_waits_for_a_forward_in_flight) {
  set_handler(SIGUSR1);
  M* mp = make<M>();
  G* run = g_(GStatus::Running);
  run->m = mp;
  cr_assert_eq(route(SIGUSR1, {run}).kind(), SigRoute::Running);
  mp->sigfwd[SIGUSR2].store(run);
  cr_assert_eq(route(SIGUSR1, {run}).kind(), SigRoute::Running, "a forward of another signal");
  mp->sigfwd[SIGUSR1].store((G*)((uintptr_t)run | 1));
  SigRoute r = route(SIGUSR1, {run});
  cr_assert_eq(r.kind(), SigRoute::Later);
  cr_assert_eq(r.target(), run);
  G* w = g_(GStatus::Waiting, bit(SIGUSR1), bit(SIGUSR1));
  cr_assert_eq(route(SIGUSR1, {run, w}).kind(), SigRoute::Waiter);
  G* other = g_(GStatus::Syscall);
  other->m = make<M>();
  cr_assert_eq(route(SIGUSR1, {other, run}).kind(), SigRoute::Running, "the first one, on another M");
  mp->sigfwd[SIGUSR1].store(nullptr);
  cr_assert_eq(route(SIGUSR1, {run}).kind(), SigRoute::Running, "arrived: routed again");
}

// ---- kernel masks -----------------------------------------------------------------

// sysmon's kernel mask: it receives the signals the program handles, those
// some G waits for, those goshim wraps and (unless every live G blocks
// them) those whose default action ends the process; the ignored ones,
// SIGCANCEL and the preemption signal stay blocked; SIGSETXID is always
// open.
Test(signal, sysmon_mask) {
  config.preempt_signal = SIGURG;
  for (int s = 1; s <= 64; s++)
    if (s != SIGKILL && s != SIGSTOP && s != 32 && s != 33) set_default(s);
  set_handler(SIGUSR1);
  set_ignore(SIGHUP);
  auto open = [](uint64_t mask, int sig) { return !(mask & bit(sig)); };
  uint64_t m = signal_sysmon_mask(bit(SIGUSR2) | bit(SIGCHLD) | bit(SIGPIPE), 0);
  cr_assert(open(m, SIGUSR1), "handled");
  cr_assert(open(m, SIGUSR2), "waited for");
  cr_assert(open(m, SIGCHLD), "waited for, though ignored by default");
  cr_assert(open(m, SIGPIPE), "waited for");
  cr_assert(open(m, SIGTERM), "ends the process by default");
  cr_assert(open(m, SIGINT));
  cr_assert(open(m, SIGRTMIN + 2), "real-time signals end the process by default");
  cr_assert(!open(m, SIGHUP), "ignored, not waited for");
  cr_assert(!open(m, SIGWINCH), "ignored by default, not waited for");
  cr_assert(!open(m, SIGCONT));
  cr_assert(!open(m, SIGTSTP), "a stop signal is not taken");
  cr_assert(!open(m, 32), "SIGCANCEL");
  cr_assert(open(m, 33), "SIGSETXID");
  cr_assert(!open(m, SIGURG), "the preemption signal");
  cr_assert(!open(signal_sysmon_mask(bit(SIGURG) | bit(32), 0), SIGURG),
            "internal signals stay blocked even if waited for");
  // Blocked by every live G: left in the kernel (signalfd, a later
  // unblocking), unless handled or waited for.
  m = signal_sysmon_mask(bit(SIGUSR2), bit(SIGTERM) | bit(SIGUSR1) | bit(SIGUSR2));
  cr_assert(!open(m, SIGTERM));
  cr_assert(open(m, SIGINT));
  cr_assert(open(m, SIGUSR1), "handled: taken and held for the G that unblocks it");
  cr_assert(open(m, SIGUSR2), "waited for");
  // A handler set later opens it; going back to the default keeps it open
  // only as a signal that ends the process.
  set_handler(SIGWINCH);
  cr_assert(open(signal_sysmon_mask(0, 0), SIGWINCH));
  set_default(SIGWINCH);
  cr_assert(!open(signal_sysmon_mask(0, 0), SIGWINCH));
  set_ignore(SIGTERM);
  cr_assert(!open(signal_sysmon_mask(0, 0), SIGTERM), "SIGTERM ignored");
}

// An M that sleeps without a G blocks every signal sysmon takes (only
// sysmon holds them for the process then) on top of what it had, never
// an internal one; so does a new M until its first G, on top of its
// creator's mask with the internal signals open (sysmon, whose mask opens
// what it takes, starts Ms too).
Test(signal, idle_and_new_m_masks) {
  config.preempt_signal = SIGURG;
  set_handler(SIGUSR1);
  set_handler(SIGURG);
  set_default(SIGUSR2);
  set_default(SIGWINCH);
  set_ignore(SIGTERM);
  uint64_t cur = bit(SIGHUP);
  uint64_t m = signal_m_sleep_mask(cur);
  cr_assert(m & bit(SIGHUP), "what it blocked stays blocked");
  cr_assert(m & bit(SIGUSR1), "a handled signal is sysmon's while no G runs here");
  cr_assert(m & bit(SIGUSR2),
            "at a default action that ends the process, not wrapped: sysmon's too (it may get a handler while "
            "this M sleeps)");
  cr_assert(!(m & bit(SIGWINCH)), "ignored by default, not wrapped: not taken from it");
  cr_assert(!(m & bit(SIGTERM)), "ignored by the program: not taken from it");
  cr_assert(!(m & bit(SIGURG)), "the preemption signal");
  cr_assert(!(m & bit(32)) && !(m & bit(33)), "SIGCANCEL, SIGSETXID");
  uint64_t n = signal_new_m_mask(~0ull);
  cr_assert(!(n & bit(32)) && !(n & bit(33)) && !(n & bit(SIGURG)), "internal signals open");
  cr_assert((n & bit(SIGUSR1)) && (n & bit(SIGTERM)), "the program's blocked signals stay blocked");
  // Started by sysmon (or a G that leaves them open): still sysmon's until
  // the M runs a G, else two threads take one signal's instances at once.
  n = signal_new_m_mask(0);
  cr_assert(n & bit(SIGUSR1), "a handled signal is sysmon's while no G runs here");
  cr_assert(n & bit(SIGUSR2), "at a default action that ends the process: sysmon's too");
  cr_assert(!(n & bit(SIGWINCH)) && !(n & bit(SIGTERM)), "not taken by sysmon: as the creator had it");
  cr_assert(!(n & bit(32)) && !(n & bit(33)) && !(n & bit(SIGURG)), "internal signals open");
  cr_assert_eq(n, signal_m_sleep_mask(0), "the mask of an M sleeping idle");
}

// An M never takes a kernel mask that blocks a signal forwarded to it and
// not yet arrived (M::fwd_bits): the forward would stay pending on that
// thread while the G it is for waits for it.
Test(signal, kernel_mask_never_blocks_a_forward_in_flight) {
  M* mp = make<M>();
  uint64_t want = bit(SIGUSR1) | bit(SIGUSR2) | bit(SIGTERM);
  cr_assert_eq(signal_kmask_for(mp, want), want);
  mp->fwd_bits.store(bit(SIGUSR1) | bit(SIGINT));
  cr_assert_eq(signal_kmask_for(mp, want), bit(SIGUSR2) | bit(SIGTERM));
  cr_assert_eq(signal_kmask_for(mp, 0), 0);
  mp->fwd_bits.store(0);
  cr_assert_eq(signal_kmask_for(mp, want), want, "arrived: the wanted mask again");
}

// ---- the kernel-level handler: the signal the kernel gave this M -----------------

namespace {

siginfo_t info(int sig, int code) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = sig;
  si.si_code = code;
  return si;
}

G* g0_() {
  G* g = g_(GStatus::Running);
  g->flags = kGFlagG0;
  return g;
}

}  // namespace

// On g0 (the scheduler, an idle M, sysmon) a signal is held for the
// process, for sysmon to route to a G; a fault there is the default
// action, here.
Test(signal, here_on_g0) {
  siginfo_t user = info(SIGUSR1, SI_USER), tk = info(SIGUSR1, SI_TKILL);
  siginfo_t fault = info(SIGSEGV, SEGV_MAPERR);
  G* g0 = g0_();
  cr_assert_eq(signal_here(g0, SIGUSR1, &user, nullptr, false), SigHere::Defer);
  cr_assert_eq(signal_here(g0, SIGUSR1, &tk, nullptr, false), SigHere::Defer);
  cr_assert_eq(signal_here(g0, SIGUSR1, nullptr, nullptr, false), SigHere::Defer);
  cr_assert_eq(signal_here(g0, SIGSEGV, &fault, nullptr, false), SigHere::DieHere);
  siginfo_t kill_segv = info(SIGSEGV, SI_USER);  // sent, not a fault
  cr_assert_eq(signal_here(g0, SIGSEGV, &kill_segv, nullptr, false), SigHere::Defer);
}

// On a G that leaves it open, it runs there; on one that blocks it, a
// thread-directed signal waits on that G, a process-directed one goes back
// to the process (another G may take it); a fault always belongs to the G
// that made it.
Test(signal, here_on_a_user_g) {
  siginfo_t user = info(SIGUSR1, SI_USER), tk = info(SIGUSR1, SI_TKILL);
  siginfo_t queue = info(SIGUSR1, SI_QUEUE);
  G* open = g_(GStatus::Running);
  cr_assert_eq(signal_here(open, SIGUSR1, &user, nullptr, false), SigHere::Run);
  cr_assert_eq(signal_here(open, SIGUSR1, &tk, nullptr, false), SigHere::Run);
  cr_assert_eq(signal_here(open, SIGUSR1, nullptr, nullptr, false), SigHere::Run);
  G* blocks = g_(GStatus::Running, bit(SIGUSR1));
  cr_assert_eq(signal_here(blocks, SIGUSR1, &tk, nullptr, false), SigHere::PendingOnG);
  cr_assert_eq(signal_here(blocks, SIGUSR1, &user, nullptr, false), SigHere::Defer);
  cr_assert_eq(signal_here(blocks, SIGUSR1, &queue, nullptr, false), SigHere::Defer,
               "sigqueue to the process");
  cr_assert_eq(signal_here(blocks, SIGUSR2, &user, nullptr, false), SigHere::Run,
               "it blocks another signal");
  G* blocks_segv = g_(GStatus::Running, bit(SIGSEGV));
  siginfo_t fault = info(SIGSEGV, SEGV_ACCERR);
  cr_assert_eq(signal_here(blocks_segv, SIGSEGV, &fault, nullptr, false), SigHere::Run);
  siginfo_t sent_segv = info(SIGSEGV, SI_USER);
  cr_assert_eq(signal_here(blocks_segv, SIGSEGV, &sent_segv, nullptr, false), SigHere::Defer,
               "a SIGSEGV sent by kill is an ordinary process signal");
}

// A signal sent to the process that hits another G while the main G
// would take it natively is held for sysmon to route to main (Defer):
// kill (SI_USER), sigqueue from another process, alarm's SIGALRM
// (SI_KERNEL), mq_notify, AIO. Not thread-directed signals, faults, the
// kernel's own SIGPIPE/SIGXFSZ (SI_USER from this process), SIGCHLD, a
// POSIX timer's (SI_TIMER), a sigqueue from this process (possibly
// pthread_sigqueue), nor a signal main cannot take now; on main itself it
// runs.
Test(signal, here_sent_to_the_process_goes_to_main) {
  G* m = g_(GStatus::Waiting, 0, 0, WaitKind::Sleep);
  m->flags = kGFlagMain;
  G* w = g_(GStatus::Running);
  siginfo_t user = info(SIGUSR1, SI_USER), tk = info(SIGUSR1, SI_TKILL);
  siginfo_t alrm = info(SIGALRM, SI_KERNEL), timer = info(SIGRTMIN, SI_TIMER);
  siginfo_t queue = info(SIGUSR1, SI_QUEUE), own_queue = info(SIGUSR1, SI_QUEUE);
  queue.si_pid = getpid() + 1;
  own_queue.si_pid = getpid();
  siginfo_t mq = info(SIGUSR2, SI_MESGQ), aio = info(SIGUSR2, SI_ASYNCIO);
  siginfo_t pipe_self = info(SIGPIPE, SI_USER), pipe_other = info(SIGPIPE, SI_USER);
  pipe_self.si_pid = getpid();
  pipe_other.si_pid = getpid() + 1;
  siginfo_t chld = info(SIGCHLD, CLD_EXITED), chld_user = info(SIGCHLD, SI_USER);
  siginfo_t fault = info(SIGSEGV, SEGV_MAPERR);
  cr_assert_eq(signal_here(w, SIGUSR1, &user, nullptr, false, m), SigHere::Defer);
  cr_assert_eq(signal_here(w, SIGALRM, &alrm, nullptr, false, m), SigHere::Defer);
  cr_assert_eq(signal_here(w, SIGUSR1, &queue, nullptr, false, m), SigHere::Defer);
  cr_assert_eq(signal_here(w, SIGUSR2, &mq, nullptr, false, m), SigHere::Defer);
  cr_assert_eq(signal_here(w, SIGUSR2, &aio, nullptr, false, m), SigHere::Defer);
  cr_assert_eq(signal_here(w, SIGPIPE, &pipe_other, nullptr, false, m), SigHere::Defer);
  cr_assert_eq(signal_here(w, SIGUSR1, &tk, nullptr, false, m), SigHere::Run);
  cr_assert_eq(signal_here(w, SIGRTMIN, &timer, nullptr, false, m), SigHere::Run);
  cr_assert_eq(signal_here(w, SIGUSR1, &own_queue, nullptr, false, m), SigHere::Run);
  cr_assert_eq(signal_here(w, SIGPIPE, &pipe_self, nullptr, false, m), SigHere::Run);
  cr_assert_eq(signal_here(w, SIGCHLD, &chld, nullptr, false, m), SigHere::Run);
  cr_assert_eq(signal_here(w, SIGCHLD, &chld_user, nullptr, false, m), SigHere::Run);
  cr_assert_eq(signal_here(w, SIGSEGV, &fault, nullptr, false, m), SigHere::Run);
  cr_assert_eq(signal_here(w, SIGUSR1, nullptr, nullptr, false, m), SigHere::Run, "no siginfo");
  cr_assert_eq(signal_here(w, SIGUSR1, &user, w, false, m), SigHere::Run, "a forward to w");
  cr_assert_eq(signal_here(m, SIGUSR1, &user, nullptr, false, m), SigHere::Run, "on main itself");
  cr_assert_eq(signal_here(w, SIGUSR1, &user, nullptr, false, nullptr), SigHere::Run, "no leader");
  G* mb = g_(GStatus::Waiting, bit(SIGUSR1), 0, WaitKind::Sleep);
  mb->flags = kGFlagMain;
  cr_assert_eq(signal_here(w, SIGUSR1, &user, nullptr, false, mb), SigHere::Run, "main blocks it");
  G* mj = g_(GStatus::Waiting, 0, 0, WaitKind::None);
  mj->flags = kGFlagMain;
  cr_assert_eq(signal_here(w, SIGUSR1, &user, nullptr, false, mj), SigHere::Run, "main in pthread_join");
  G* ms = g_(GStatus::Waiting, bit(SIGUSR1), bit(SIGUSR1));
  ms->flags = kGFlagMain;
  cr_assert_eq(signal_here(w, SIGUSR1, &user, nullptr, false, ms), SigHere::Defer,
               "main waits for it in sigwait");
}

// A G in its sigwait/sigsuspend window (its set published, perhaps not
// parked yet) never runs a handler for a signal of that set on its M:
// running it there would let it park with the handler already run, and
// nothing would end the wait. A process signal is held for sysmon to route
// to it as the waiter; a thread-directed one (its own tkill, a forward)
// stays pending on it and its wait is ended. A signal it does not wait for
// runs as usual.
Test(signal, here_on_a_g_in_its_wait_window) {
  siginfo_t user = info(SIGUSR1, SI_USER), tk = info(SIGUSR1, SI_TKILL);
  G* susp = g_(GStatus::Running, 0, bit(SIGUSR1));
  cr_assert_eq(signal_here(susp, SIGUSR1, &user, nullptr, false), SigHere::Defer);
  cr_assert_eq(signal_here(susp, SIGUSR1, &tk, nullptr, false), SigHere::ThreadWaiting);
  cr_assert_eq(signal_here(susp, SIGUSR1, &tk, susp, false), SigHere::ThreadWaiting,
               "pthread_kill's forward");
  cr_assert_eq(signal_here(susp, SIGUSR1, &tk, susp, true), SigHere::ProcFwdWaiting,
               "a routed process signal's forward");
  cr_assert_eq(signal_here(susp, SIGUSR2, &user, nullptr, false), SigHere::Run,
               "a signal it does not wait for");
  // sigwait with the signal blocked (the usual case): a thread-directed
  // one is pending on it (its wait ended), a process one held for sysmon.
  G* sw = g_(GStatus::Running, bit(SIGUSR1), bit(SIGUSR1));
  cr_assert_eq(signal_here(sw, SIGUSR1, &tk, nullptr, false), SigHere::PendingOnG);
  cr_assert_eq(signal_here(sw, SIGUSR1, &user, nullptr, false), SigHere::Defer);
  cr_assert_eq(signal_here(sw, SIGUSR1, &tk, sw, true), SigHere::ProcFwdBlocked);
  // A fault is the G's own, waiting or not.
  G* sfault = g_(GStatus::Running, 0, bit(SIGSEGV));
  siginfo_t fault = info(SIGSEGV, SEGV_MAPERR);
  cr_assert_eq(signal_here(sfault, SIGSEGV, &fault, nullptr, false), SigHere::Run);
}

// Forwards (M::sigfwd): one for a G that left this M before it arrived is
// pending on that G (wherever it lands: g0, another G); one for the G here
// runs, unless it blocks it again: a routed process signal then stays with
// it while still claimed, a thread-directed one waits on it.
Test(signal, here_with_a_forward) {
  siginfo_t tk = info(SIGUSR1, SI_TKILL);
  G* here = g_(GStatus::Running);
  G* gone = g_(GStatus::Waiting);
  cr_assert_eq(signal_here(here, SIGUSR1, &tk, gone, true), SigHere::ForOther);
  cr_assert_eq(signal_here(here, SIGUSR1, &tk, gone, false), SigHere::ForOther);
  cr_assert_eq(signal_here(g0_(), SIGUSR1, &tk, gone, false), SigHere::ForOther);
  G* blocks = g_(GStatus::Running, bit(SIGUSR1), bit(SIGUSR1));
  cr_assert_eq(signal_here(blocks, SIGUSR1, &tk, gone, true), SigHere::ForOther,
               "even if the G here blocks it or waits for it");
  cr_assert_eq(signal_here(here, SIGUSR1, &tk, here, true), SigHere::Run);
  cr_assert_eq(signal_here(here, SIGUSR1, &tk, here, false), SigHere::Run);
  G* reblocked = g_(GStatus::Running, bit(SIGUSR1));
  cr_assert_eq(signal_here(reblocked, SIGUSR1, &tk, reblocked, true), SigHere::ProcFwdBlocked);
  cr_assert_eq(signal_here(reblocked, SIGUSR1, &tk, reblocked, false), SigHere::PendingOnG);
  siginfo_t q = info(SIGUSR1, SI_QUEUE);  // pthread_sigqueue's forward
  cr_assert_eq(signal_here(reblocked, SIGUSR1, &q, reblocked, false), SigHere::PendingOnG);
}
