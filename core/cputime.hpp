// Per-goroutine CPU time: what CLOCK_THREAD_CPUTIME_ID, the clock of
// pthread_getcpuclockid and getrusage(RUSAGE_THREAD) report for a G.
//
// Always on, from the process's start, with no system call on the switch
// path. Each M keeps a window: its kernel thread's CPU clock when the
// window opened, and which Gs ran in it for how long, measured in cycle
// counter ticks (rdtsc; cntvct_el0 on aarch64): one counter read per
// switch (taken before the switch: cputime_switch_tick; a second one when
// the scheduler had to search for the next G) and a few stores to the M
// and the G. The run queues' ready stamps reuse the M's last reading
// (core/runq.cpp), so a switch reads the counter as often as before. The M
// reads its kernel thread's CPU time (a system call, ~0.8 us here) only to
// close a window, and then divides the CPU time its kernel thread used in
// the window among the Gs that ran in it, in proportion to their ticks; the
// ticks the M spent in its own scheduler count in the total and their share
// goes to nobody (but a G the scheduler found on its first look is charged
// that short search). A window closes:
//   - at a switch out once it is open ~1 ms (kCloseNs), or when it has
//     kEntries different Gs: at most ~1,000 clock reads a second per M
//     (under 0.1 % of a CPU);
//   - when a G reads its own CPU clock (the read's system call; the G gets
//     everything its M's windows owe it, exactly);
//   - after a blocking call (syscalls/blocking.cpp) that lasted over
//     kLongBlockNs: the kernel thread was off CPU for most of it, so the
//     ticks of the call are not run time. The window is split at the call's
//     start: what ran before gets its ticks at the M's last measured rate
//     (CPU ns per tick, capped by the window's CPU), the call's G the rest,
//     which is the kernel CPU its call used, as natively. A shorter call
//     counts as running. No clock read at a blocking call's entry.
// An M's sleep (stopm, netpoll) is in no window: its ticks are skipped
// (a window open ~1 ms closes as the M goes to sleep).
// Which reading: a G's own clock read, the blocking-call split and an M's
// sleep or exit read the thread's CPU clock (exact); the windows that close
// at a switch (age, a 17th G) take getrusage(RUSAGE_THREAD), the time the
// kernel last accounted (at the thread's last switch or tick): a CPU clock
// read also updates the scheduler's account of the running thread, and on
// Linux 6.6+ (EEVDF) ends its time slice there when it is used up, which
// every ~1 ms cost a 2-processor ping-pong under load ~20 % (cputime.cpp,
// self_cpu_lazy). A window's start never goes back (an exact reading may be
// ahead of a later lazy one), so the division stays conserved. The cost: a
// lazy reading's lag (up to a tick) goes to the next window's Gs. Where an
// M alternates a G that computes whole time slices with Gs that run in
// short bursts, the lag at the bursts' last window tends to go to the
// computing G (its slice's end is a kernel update point: more often fresh),
// so the bursting Gs lose up to a tick per slice (measured under load: 20 %
// of a ping-pong pair's 30 ms beside two 220 ms computing threads).
//
// Accuracy. Every M's CPU time is conserved: each window's CPU is divided
// (rounded down) among its Gs and the M's own share, never more; so a G's
// time is at most its kernel threads' and the sum of all Gs' at most the
// process's. The division assumes the kernel thread was on CPU at the same
// rate during the window for all its Gs: when the kernel preempts the
// thread (another process takes the CPU) while one G runs, that G's ticks
// count the off-CPU time too, and it gets more than its share of that
// window at the others' expense; the error is bounded by the window (about
// 1 ms of CPU, or one time slice when a G computes without switching), and
// preemption falls on the Gs in proportion to their run time on average.
// A blocked or parked G accrues nothing (parked: no ticks; a blocking call
// over kLongBlockNs: its kernel CPU, give or take the split's estimate of
// the window before the call; a shorter call counts up to kLongBlockNs of
// its wall time as run time). A G's time in a window that
// is still open on another M (it moved on) is added when that M closes it,
// so a G's own reading can lag its true value by up to a window on each M
// it left since. Reading another G's clock adds the ticks of its open
// window at its M's last rate (an estimate); every reading of a G is at
// least the previous one (G::cpu_seen). The cycle counter must be
// synchronized across CPUs (constant_tsc; the kernel's own condition for
// using the TSC); a backward step counts as 0. A G's time wraps after 2^56
// ns (2.28 years).
#pragma once

#include <stdint.h>

#include "core/gmp.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

// The cycle counter (ticks).
inline uint64_t cputicks() {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return (uint64_t)sys::nanotime();
#endif
}

// Closes mp's window (on mp's thread): with the kernel's last account of
// the thread (a switch's) / with its exact CPU clock (where the thread
// blocks or ends next anyway).
void cputime_close(M* mp, uint64_t now);
void cputime_close_exact(M* mp, uint64_t now);
void cputime_add_entry(M* mp, G* gp, uint64_t t, uint64_t now);

// Its scheduler (g0) starts a run of gp on the calling kernel thread (mp).
inline void cputime_in(M* mp, uint64_t now) {
  CpuWindow& w = mp->cw;
  int64_t d = (int64_t)(now - w.last);
  if (d > 0 && w.last) w.total += (uint64_t)d;
  w.last = now;
}
inline void cputime_in(G* gp) { cputime_in(gp->m, cputicks()); }

// gp stops running on mp (its M, the calling kernel thread).
inline void cputime_out(G* gp, M* mp, uint64_t now) {
  CpuWindow& w = mp->cw;
  int64_t d = (int64_t)(now - w.last);
  uint64_t t = d > 0 && w.last ? (uint64_t)d : 0;
  w.last = now;
  if (__builtin_expect(gp->cpu_win_m == mp && gp->cpu_win_gen == w.gen, 1)) {
    w.ent[gp->cpu_win_idx].ticks += t;
    w.total += t;
    if (__builtin_expect(now - w.opened >= w.close_ticks, 0)) cputime_close(mp, now);
  } else {
    cputime_add_entry(mp, gp, t, now);
  }
}
inline void cputime_out(G* gp) { cputime_out(gp, gp->m, cputicks()); }

void cputime_block_exit(G* gp);

// gp is about to switch out (park, yield): the tick its run ends at, in
// mp->cw.sw_tick for the continuation on the other side of the switch; read
// here, before the switch (right after the thread pointer moved, the
// counter read cost ~10 ns more a switch). A G that parks or yields inside
// a blocking call (a program handler's) ends the call's accounting first.
inline void cputime_switch_tick(M* mp, G* gp) {
  if (__builtin_expect(mp->cw.block_at != 0, 0)) cputime_block_exit(gp);
  mp->cw.sw_tick = cputicks();
}

// The calling M goes to sleep (no G) / wakes: the sleep is in no window.
// A window open ~1 ms closes first (its Gs get their time before a long
// sleep); a younger one stays open across the sleep.
inline void cputime_m_sleep(M* mp) {
  uint64_t now = cputicks();
  cputime_in(mp, now);
  // Exact: the thread blocks next, so the read's end of its time slice
  // costs nothing, and no lag goes to the Gs of the window after the sleep.
  if (mp->cw.n && now - mp->cw.opened >= mp->cw.close_ticks) cputime_close_exact(mp, now);
}
inline void cputime_m_wake(M* mp) { mp->cw.last = cputicks(); }

// mp's kernel thread starts (or the runtime starts on M0): its CPU clock
// counts from 0. On mp's thread.
void cputime_m_start(M* mp);
// mp's kernel thread ends: what its open window owes goes out now.
void cputime_m_exit(M* mp);

// The running G enters / leaves a blocking call (syscalls/blocking.cpp). On
// the G, on its M.
void cputime_block_enter(G* gp);

// The CPU time gp has used, in ns, or -1 if gp is gone. self is the calling
// G (or null). Any thread.
int64_t g_cputime(G* gp, G* self);

// A new G (thread_create): no CPU time.
void cputime_reset(G* gp);
// The forking G in the child, on its M: the child's thread starts with no
// CPU time, as natively; the M's window starts again.
void cputime_after_fork(G* gp, M* mp);

}  // namespace goshim
