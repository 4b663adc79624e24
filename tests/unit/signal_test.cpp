// The routing tables of process-directed signals (core/signal.cpp): which
// G sysmon gives a process signal to (SigRoute: a sigwait/sigsuspend
// waiter, else a running G that does not block it, else a parked or
// runnable one; blocked everywhere: it stays pending; left at a default
// action that ends the process: sysmon takes it itself), and which
// signals sysmon's own kernel mask leaves open (signal_sysmon_mask), and
// what goshim's kernel-level handler does with a signal the kernel gave an
// M (signal_here: run it on the G there, hold it for sysmon to route, or
// leave it pending on a G). Fake Gs that never run; the program's
// dispositions are recorded with signal_record_action, as the shim's
// sigaction does.
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#include "core/config.hpp"
#include "core/gmp.hpp"
#include "core/signal.hpp"

using namespace goshim;

namespace {

uint64_t bit(int sig) { return 1ull << (sig - 1); }

G* g_(GStatus st, uint64_t mask = 0, uint64_t waiting = 0, WaitKind wk = WaitKind::None) {
  static uint64_t ids;
  G* gp = new (aligned_alloc(64, (sizeof(G) + 63) & ~size_t{63})) G();
  gp->goid = ++ids;
  gp->magic = kGMagic;
  gp->status.store(st);
  gp->sigmask = mask;
  gp->sigwaiting.store(waiting);
  gp->wait_kind.store(wk);
  return gp;
}

void handler(int) {}

void set_handler(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  signal_record_action(sig, &sa);
}

void set_default(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  signal_record_action(sig, &sa);
}

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

// A G waiting for the signal (sigwait, sigsuspend) takes it before any
// running or parked G, even though it blocks it (sigwait's contract); the
// first waiter found wins and ends the search.
Test(signal, waiter_first_even_if_it_blocks_the_signal) {
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
}

// No waiter: the first G on an M (running, or in a blocking call) that
// does not block it, before any parked or runnable one.
Test(signal, running_before_parked_masks_respected) {
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

// Nobody on an M: a parked or runnable G; one in an interruptible wait
// (the signal can end its wait with EINTR) is preferred, the last such one
// found; without one, the first candidate.
Test(signal, parked_prefers_an_interruptible_wait) {
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
// pending for the process until a G unblocks it or waits for it.
Test(signal, blocked_everywhere_stays_pending) {
  set_handler(SIGUSR1);
  uint64_t m = bit(SIGUSR1);
  SigRoute r = route(SIGUSR1, {g_(GStatus::Running, m), g_(GStatus::Waiting, m, 0, WaitKind::Sema),
                               g_(GStatus::Runnable, m), g_(GStatus::Syscall, m)});
  cr_assert_null(r.target());
  cr_assert_eq(r.kind(), SigRoute::Pending);
  // Also with SIGTERM at its default action: nothing to die for yet.
  set_default(SIGTERM);
  r = route(SIGTERM, {g_(GStatus::Running, bit(SIGTERM))});
  cr_assert_eq(r.kind(), SigRoute::Pending);
}

// Slots that are not live goroutines never get a signal: free (Idle),
// exited (Dead), exiting (they give back what they hold themselves), and
// slots without a G.
Test(signal, idle_dead_exiting_and_empty_slots_skipped) {
  set_handler(SIGUSR1);
  G* idle = g_(GStatus::Idle);
  G* dead = g_(GStatus::Dead);
  G* exiting = g_(GStatus::Running);
  exiting->sig_exiting.store(true);
  G* empty = g_(GStatus::Running);
  empty->magic = 0;
  G* waiting_dead = g_(GStatus::Dead, 0, bit(SIGUSR1));
  SigRoute r = route(SIGUSR1, {idle, dead, exiting, empty, waiting_dead});
  cr_assert_eq(r.kind(), SigRoute::Pending);
  G* ok = g_(GStatus::Waiting, 0, 0, WaitKind::None);
  r = route(SIGUSR1, {idle, dead, exiting, empty, waiting_dead, ok});
  cr_assert_eq(r.target(), ok);
}

// The program's disposition: a signal left at a default action that ends
// the process is taken by sysmon itself (routing it to a G would wait for
// that G to run) unless a G waits for it; one with a handler, or ignored
// by default, goes to a G.
Test(signal, default_action_that_ends_the_process_dies_in_sysmon) {
  set_default(SIGTERM);
  G* run = g_(GStatus::Running);
  cr_assert_eq(route(SIGTERM, {run}).kind(), SigRoute::Die);
  cr_assert_eq(route(SIGTERM, {g_(GStatus::Waiting, 0, 0, WaitKind::Sema)}).kind(), SigRoute::Die);
  G* w = g_(GStatus::Waiting, bit(SIGTERM), bit(SIGTERM));
  SigRoute r = route(SIGTERM, {run, w});
  cr_assert_eq(r.kind(), SigRoute::Waiter, "sigwait takes it");
  cr_assert_eq(r.target(), w);
  set_handler(SIGTERM);
  cr_assert_eq(route(SIGTERM, {run}).kind(), SigRoute::Running, "the program handles it");
  // Ignored by default (SIGCHLD, SIGWINCH, SIGURG, SIGCONT): routed.
  set_default(SIGWINCH);
  cr_assert_eq(route(SIGWINCH, {run}).kind(), SigRoute::Running);
  set_default(SIGCHLD);
  cr_assert_eq(route(SIGCHLD, {run}).kind(), SigRoute::Running);
  // Stop signals do not end the process.
  set_default(SIGTSTP);
  cr_assert_eq(route(SIGTSTP, {run}).kind(), SigRoute::Running);
}

// sysmon's kernel mask: it receives the signals the program handles, those
// some G waits for, and (unless every live G blocks them) those whose
// default action ends the process; the ignored-by-default ones, SIGCANCEL
// and the preemption signal stay blocked; SIGSETXID is always open.
Test(signal, sysmon_mask) {
  config.preempt_signal = SIGURG;
  for (int s = 1; s <= 64; s++)
    if (s != SIGKILL && s != SIGSTOP && s != 32 && s != 33) set_default(s);
  set_handler(SIGUSR1);
  auto open = [](uint64_t mask, int sig) { return !(mask & bit(sig)); };
  uint64_t m = signal_sysmon_mask(bit(SIGUSR2) | bit(SIGCHLD), 0);
  cr_assert(open(m, SIGUSR1), "handled");
  cr_assert(open(m, SIGUSR2), "waited for");
  cr_assert(open(m, SIGCHLD), "waited for, though ignored by default");
  cr_assert(open(m, SIGTERM), "ends the process by default");
  cr_assert(open(m, SIGINT));
  cr_assert(open(m, SIGRTMIN + 2), "real-time signals end the process by default");
  cr_assert(!open(m, SIGWINCH), "ignored by default, not waited for");
  cr_assert(!open(m, SIGCONT));
  cr_assert(!open(m, SIGTSTP), "a stop signal is not taken");
  cr_assert(!open(m, 32), "SIGCANCEL");
  cr_assert(open(m, 33), "SIGSETXID");
  cr_assert(!open(m, SIGURG), "the preemption signal");
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
  G* blocks = g_(GStatus::Running, bit(SIGUSR1));
  cr_assert_eq(signal_here(blocks, SIGUSR1, &tk, nullptr, false), SigHere::PendingOnG);
  cr_assert_eq(signal_here(blocks, SIGUSR1, &user, nullptr, false), SigHere::Defer);
  cr_assert_eq(signal_here(blocks, SIGUSR1, &queue, nullptr, false), SigHere::Defer);
  cr_assert_eq(signal_here(blocks, SIGUSR2, &user, nullptr, false), SigHere::Run,
               "it blocks another signal");
  G* blocks_segv = g_(GStatus::Running, bit(SIGSEGV));
  siginfo_t fault = info(SIGSEGV, SEGV_ACCERR);
  cr_assert_eq(signal_here(blocks_segv, SIGSEGV, &fault, nullptr, false), SigHere::Run);
}

// A G entering sigsuspend (its set published, perhaps not parked yet)
// never runs a process signal's handler on its M: held, for sysmon to
// route to it as the waiter. A signal sent to its own thread runs.
Test(signal, here_on_a_g_entering_sigsuspend) {
  siginfo_t user = info(SIGUSR1, SI_USER), tk = info(SIGUSR1, SI_TKILL);
  G* susp = g_(GStatus::Running, 0, bit(SIGUSR1));
  cr_assert_eq(signal_here(susp, SIGUSR1, &user, nullptr, false), SigHere::Defer);
  cr_assert_eq(signal_here(susp, SIGUSR1, &tk, nullptr, false), SigHere::Run);
  cr_assert_eq(signal_here(susp, SIGUSR2, &user, nullptr, false), SigHere::Run,
               "a signal it does not wait for");
}

// Forwards (M::sigfwd): one for a G that left this M before it arrived
// is pending on that G; one for the G here runs, unless it blocks it
// again: a routed process signal then stays with it while still claimed,
// a thread-directed one waits on it.
Test(signal, here_with_a_forward) {
  siginfo_t tk = info(SIGUSR1, SI_TKILL);
  G* here = g_(GStatus::Running);
  G* gone = g_(GStatus::Waiting);
  cr_assert_eq(signal_here(here, SIGUSR1, &tk, gone, true), SigHere::ForOther);
  cr_assert_eq(signal_here(here, SIGUSR1, &tk, gone, false), SigHere::ForOther);
  cr_assert_eq(signal_here(g0_(), SIGUSR1, &tk, gone, false), SigHere::ForOther);
  cr_assert_eq(signal_here(here, SIGUSR1, &tk, here, true), SigHere::Run);
  cr_assert_eq(signal_here(here, SIGUSR1, &tk, here, false), SigHere::Run);
  G* reblocked = g_(GStatus::Running, bit(SIGUSR1));
  cr_assert_eq(signal_here(reblocked, SIGUSR1, &tk, reblocked, true), SigHere::ProcFwdBlocked);
  cr_assert_eq(signal_here(reblocked, SIGUSR1, &tk, reblocked, false), SigHere::PendingOnG);
  siginfo_t q = info(SIGUSR1, SI_QUEUE);  // pthread_sigqueue's forward
  cr_assert_eq(signal_here(reblocked, SIGUSR1, &q, reblocked, false), SigHere::PendingOnG);
}
