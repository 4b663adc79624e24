// The scheduler's entry points for the rest of goshim. shim/ calls only
// these (and sema/netpoll/timer/blocking); nothing here calls an interposed
// symbol.
#pragma once

#include <stdint.h>

#include "core/cputime.hpp"
#include "core/gmp.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

// ---- park / ready (park.cpp) ----------------------------------------------

// On user G. Parks the current G. On g0, after the G's context is saved,
// unlockf(gp, arg) runs (if given); if it returns false the G resumes at
// once, otherwise it stays parked until someone calls ready(gp).
// unlockf must not touch the G's stack, and after it returns true the G
// may already be running elsewhere.
void park(bool (*unlockf)(G*, void*), void* arg, WaitReason reason, const void* obj);

// Makes a Waiting G runnable. Any thread: with a P it goes to that P's
// runnext (next=true) or local queue; without one (foreign threads,
// sysmon) to the global queue. Wakes an M if one is needed.
void ready(G* gp, bool next = true);

// Readies a list of Waiting Gs (netpoll results, broadcasts).
void ready_list(GQueue& q);

// Gs parked so far (statistics: counted per P without atomics, summed here).
uint64_t total_parks();

// Any thread. Wakes gp out of the interruptible wait it is parked in (its
// G::wait_kind), so that the wait returns EINTR. Returns false if gp is not
// in such a wait. Each wait layer registers its interrupter here.
bool interrupt_wait(G* gp);
void register_wait_interrupter(WaitKind kind, bool (*fn)(G* gp));

// On user G. Yields (sched_yield): the G goes to the global queue, as Go's
// Gosched does; returns at once when nothing else is runnable. Returns
// whether it yielded.
bool gosched();
// On user G. Yields to the tail of the P's local queue.
void gosched_local();
// On user G. Yields to the global queue unconditionally (preemption).
void gosched_global();

// ---- scheduler (sched.cpp) --------------------------------------------------

// On g0, with a P. Finds a runnable G and runs it. Never returns.
[[noreturn]] void schedule();
// On g0, with a P. schedule()'s search (exposed for tests): runs the P's
// due timers, then takes the P's runnext and local queue (the global queue
// first every 61st schedtick), a batch of the global queue, half of the
// ring of another running P (not its runnext), the Gs that netpoll(0)
// makes ready (unless another M sleeps in netpoll), then steals from other
// Ps (their runnext only on the last of four passes,
// after running their due timers). With nothing found it gives up the P
// and blocks in netpoll until the earliest timer of any P, or in stopm,
// and starts over when it has a P again. Returns the G with *inherit set
// when it came from runnext; the M may be spinning (schedule() calls
// resetspinning).
G* find_runnable(bool* inherit);
// How long fd events may go unseen while every P has work queued: then
// the next scheduling round polls the network without blocking before it
// runs queued work (find_runnable), and park skips its direct hand-off.
// Go polls only when a P runs out of work (and sysmon after 10 ms): with
// every P busy, a connection's request waited for sysmon's poll, 10 ms,
// where the kernel wakes a thread blocked in recv at once (issue 16:
// MariaDB at 16 connections, 12 % of its wake-ups). The Gs it readies are
// stamped and queued behind older ones; runq_pick takes the older of the
// local ring's head and the global queue's head, so a P whose polls keep
// its ring full cannot starve the global queue (as the first version of
// this poll did; reverted in e82219c).
inline constexpr int64_t kBusyPollNs = 100 * 1000;
// Any P. Polls the network without blocking if nobody has for
// kBusyPollNs (nobody blocks in it); readies what it finds behind the
// queued Gs. now: nanotime. Whether it polled (find_runnable then looks
// for a stalled P's queue: steal_stalled).
bool netpoll_if_due(int64_t now);
// Any thread. Whether netpoll_if_due would poll at now (any clock that
// does not run ahead of nanotime; park uses the coarse one).
bool netpoll_due(int64_t now);
// Processor sharing at network calls. A connection's goroutine whose
// requests arrive while it works never parks: it kept its P for up to a
// whole time slice (10 ms) while the Gs queued behind it waited, where the
// kernel gives a woken thread the CPU within a few ms. MariaDB at 16
// connections: nearly two thirds of the transactions ran in under 0.7 ms
// and the rest queued for 5-90 ms (p95 2.5x native's at equal throughput;
// bench/RESULTS.md, 2026-11-27). After kShareSliceNs of a slice during
// which other Gs wait, a G making a network call yields at its next
// interposed call (the preemption flag: only from the program's own code,
// no lock held), to the global queue stamped now: behind the Gs that
// waited. Of 0.1, 0.3, 0.5 and 1 ms, 0.1 and 0.3 gave the lowest median
// p95 (the same); 0.3 switches less (the kernel's minimum granularity is
// 0.75-3 ms, but it also preempts for a woken thread).
inline constexpr int64_t kShareSliceNs = 300 * 1000;
// On a user G, in a network call (fdio, poll/select/epoll).
void share_slice_check();
// Tries to get an idle P running a spinning M to pick up new work. Any.
void wakep();
// A timer at when was added: make sure some M will wake for it. Any.
void wake_netpoller(int64_t when);
// Hands pp, which the calling M has just released, to another M if it has
// work (or may be needed to poll); otherwise puts it on the idle list.
void handoffp(P* pp);
// Starts an M on pp (or an idle P if pp is null). Without P or any.
void startm(P* pp, bool spinning);
// Without P. Puts the M on the idle list and sleeps until handed a P.
void stopm();
// stopm that gives up at deadline (nanotime; 0: never): returns false then,
// the M still without a P and off the idle list.
bool stopm_until(int64_t deadline);
// Tests only (tests/unit/sched_test.cpp): called, when set, by an M that
// has given its P up in find_runnable, at the end of its way to stopm, on
// g0 without P and without locks. Null otherwise.
extern void (*test_hook_before_stopm)(M* mp);
// Attach/detach a P to/from the current M.
void acquirep(P* pp);
P* releasep();
// Puts gp on the global queue (locks sched.lock).
void globrunqput(G* gp);
void globrunqputbatch(GQueue& q);

// ---- run queues (runq.cpp) --------------------------------------------------

// A cheap monotonic stamp (the cycle counter, core/cputime.hpp) for the
// order of runnable Gs between a P's ring and the global queue: only
// stamps are compared with each other.
inline uint64_t runq_stamp() { return cputicks(); }

// Owner P only. Stamps gp (G::readyat) as runnable from now.
void runqput(P* pp, G* gp, bool next);
G* runqget(P* pp, bool* inherit_time);
// The head of pp's ring, never runnext. Owner P only.
G* runq_ring_get(P* pp);
// How long a chain of runnext hand-offs (each inheriting the time slice)
// runs before queued Gs go first (runq_pick, park's direct hand-off).
inline constexpr int64_t kRunnextChainNs = 1000 * 1000;
// A chain of runnext hand-offs has held the P for kRunnextChainNs.
// Owner P only.
bool runq_chain_over(P* pp);
// Any P. Steals half of p2's queue into pp's; returns one G to run or null.
G* runqsteal(P* pp, P* p2, bool steal_runnext);
bool runqempty(P* pp);
uint32_t runqlen(P* pp);
// Owner P only. Picks the next G from the P's own queues and the global
// queue, in the scheduler's order: every 61st tick the global queue first
// (fairness), then runnext and the local ring, then a batch from the
// global queue. Returns null when all are empty.
G* runq_pick(P* pp, bool* inherit_time);
// Locks held: sched.lock. Takes up to max Gs (0: a fair share) from the
// global queue; one is returned, the rest go to pp's local queue, which
// must have room (max == 1, or the local queue is empty).
G* globrunqget(P* pp, int32_t max);

// ---- Ms and Ps (proc.cpp) ------------------------------------------------------

// Locks held: sched.lock. Idle P and M lists.
P* pidleget();
void pidleput(P* pp);
M* mget();
void mput(M* mp);
// Without P (pp just released). Drains a retired P: its Gs to the global
// queue, its timers to its replacement, the P to the spare list.
void retire_p(P* pp);
// A P for sysmon to put in place of a stalled one (spare list or new).
P* spare_get();
// Sysmon, after marking pp retired: if pp's M put it on the idle list just
// before (it was not stuck after all), takes it off to the spare list.
// Otherwise that idle P would be counted in npidle next to its replacement
// (more idle Ps than gomaxprocs: no M would steal, nor watch other Ps'
// timers) until some M picked it. Without locks.
void pidle_drop_retired(P* pp);
// Creates a kernel thread running the scheduler on pp. Without locks.
// From a context that may have interrupted the allocator (a program signal
// handler, a foreign thread) it leaves pp idle with its Gs on the global
// queue and asks sysmon to do it (sysmon_want_m). Anywhere but on sysmon it
// only prepares the M and queues it for sysmon to start (sysmon_queue_m):
// glibc's pthread_create callocs the new thread's DTV through the
// process's allocator, which may be the program's own (an executable that
// defines calloc: rustc), and newm runs inside the program's calls (an
// unlock's wake, a blocking call's hand-off), perhaps inside that
// allocator with its lock held (tests/preload/own_malloc_reentry). When
// that allocator is the program's, it queues the M for the M starter
// (runtime.cpp) instead, pp kept for it until it runs or a G coming back
// from a blocking call takes it back (mstart_reclaim_locked).
void newm(P* pp, bool spinning);
// A P kept for an M whose thread is not running yet, now taken from it
// (the M takes an idle P, or goes idle, when it starts); or nullptr.
// Locks held: sched.lock.
P* mstart_reclaim_locked();
// Starts the kernel thread of an M newm prepared (mask_known: its
// start_sigmask was recorded by newm's caller). Without locks.
void newm_start(M* mp, bool mask_known);
// Queues mp for the M starter and wakes it; false (nothing queued) when
// the starter is not running (before runtime init is done, in a fork
// child before mstarter_start, or it could not be created). Lock-free.
bool mstarter_queue(M* mp);
// Starts the M starter (runtime init; a fork child after
// mstarter_after_fork).
void mstarter_start();
void mstarter_after_fork();
// Whether the pause after a failed thread creation is over.
bool newm_retry_due();

// Per-M fast random numbers.
uint32_t fastrand();

}  // namespace goshim
