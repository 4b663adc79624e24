// Real-time goroutines (SCHED_FIFO, SCHED_RR).
//
// Natively a thread with a real-time policy runs ahead of every SCHED_OTHER
// thread: the kernel schedules it. A goroutine that takes such a policy (an
// explicit attribute at pthread_create, pthread_setschedparam,
// pthread_setschedprio or sched_setscheduler on itself) is bound to the M
// running it: the policy is applied to that M's kernel thread, then the M
// gives its P away as for a blocking call that never ends (the G stays in
// GStatus::Syscall, blocking_what "real-time"). The kernel schedules it from
// then on; the other goroutines stay M:N on the other Ms and compete with it
// only in the kernel. Without a P, every interposed call treats the G like a
// foreign kernel thread: it blocks in the kernel (core/sema's foreign path),
// sched_yield is the system call, signals reach it on its M.
//
// The policy is applied with SCHED_RESET_ON_FORK, so that a kernel thread
// cloned by this M (a new M started from here) starts as SCHED_OTHER.
//
// When the G takes a non-real-time policy again, or ends, its kernel thread
// gets SCHED_OTHER back and the G reacquires a P (exit_blocking): M:N again.
#pragma once

#include <sched.h>

#include <atomic>

#include "core/gmp.hpp"

namespace goshim {

inline bool rt_policy(int policy) {
  policy &= ~SCHED_RESET_ON_FORK;
  return policy == SCHED_FIFO || policy == SCHED_RR;
}

// On user G (Running with a P) or on a bound G (rt_locked); gp == getg().
// Gives the calling goroutine policy (SCHED_RESET_ON_FORK allowed) and
// prio, already checked for range. A real-time policy is applied to the
// kernel thread (errors are the kernel's: EPERM without the privilege) and
// binds the G; a non-real-time one is recorded and unbinds a bound G.
// Returns 0 or an errno value (then nothing changed).
int rt_set_self(int policy, int prio);

// Priority protection, as glibc's __pthread_tpp_change_priority: the
// calling goroutine gp (M:N or bound) counts ceiling `next` (-1: none) and
// uncounts `previous` (-1: none); when the highest counted ceiling changes,
// its priority becomes max(its own, that ceiling): applied to the kernel
// thread of a bound G; EINVAL for a non-real-time policy (the kernel takes
// no priority for SCHED_OTHER), as glibc's sched_setscheduler gets. As in
// glibc, a failure leaves the count raised. EAGAIN beyond 8 distinct
// ceilings at once (glibc: a count overflow). Returns 0 or an errno value.
int rt_pp_change(G* gp, int previous, int next);

// On user G (Running with a P) or on a bound G; gp == getg(). Binds the
// calling goroutine to the M running it for the rest of its life, as a
// real-time G is bound but without a policy: the kernel has tied something
// to this kernel thread (an io_uring ring set up
// IORING_SETUP_SINGLE_ISSUER, whose submissions and waits the kernel
// refuses with EEXIST from any other thread), and every later call of the
// G must come from it. The G keeps its policy; taking a non-real-time
// policy later does not unbind it. Costs a kernel thread, as natively.
void rt_bind_kernel_thread(G* gp);

// On g0, without a P: a bound G has ended on this M (goexit). The kernel
// thread gets SCHED_OTHER back and the M goes back to the scheduler.
[[noreturn]] void rt_exit_m();

// In a forked child, on its only thread: a bound G's policy was reset by
// SCHED_RESET_ON_FORK; natively the child keeps it: apply it again.
void rt_after_fork();

// pthread_create of a goroutine with a real-time policy: the creator waits
// (rt_start_wait) until the new G has applied it on its M (rt_start, in
// g_entry, before the start routine), and returns the kernel's error.
struct RtStart {
  std::atomic<uint32_t> done{0};
  int err = 0;
  bool creator_bound = false;  // the creator is itself a real-time G
};
// On the new G, before its start routine. False: the policy could not be
// applied; the G is detached and must end without running the routine.
bool rt_start(G* gp);
// Any thread (the creator). Returns 0 or the error of rt_start.
int rt_start_wait(RtStart* rs);

// A kernel thread that is not a goroutine (every thread in 1:1 mode): its
// kernel real-time priority (the kernel's futex order), 0 if it has none.
int kernel_wait_prio();

// The priority a waiter of the calling thread queues with in core/sema:
// a bound G's, a foreign kernel thread's own, else 0 (after every
// real-time waiter). Any thread.
inline int rt_wait_prio() {
  G* g = tls_g;
  if (!g) return kernel_wait_prio();
  if (!g->rt_locked) return 0;
  return g->rt_pp_max > g->sched_priority ? g->rt_pp_max : g->sched_priority;
}

// A spinning wait for a lock whose holder may be off the CPU gives the CPU
// away. sched_yield does not, from a real-time thread, to a holder of a
// lower priority (or SCHED_OTHER) on the same CPU: that thread sleeps
// briefly instead. Any thread.
void rt_spin_yield();

// Another goroutine asked for a real-time policy on gp (pthread_setschedparam
// on it): gp binds itself at its next interposed call from program code.
void rt_request(G* gp);
// On user G: called where a pending request may be honoured.
void rt_pending_apply(G* gp);

}  // namespace goshim
