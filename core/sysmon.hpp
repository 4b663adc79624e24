// sysmon: a kernel thread without a P (DESIGN.md decisions 6, 7, 8).
//
// It wakes every 20 µs while it finds something to do, backing off to
// 10 ms when idle (Go's schedule), and on each wake:
//   - polls the network if nobody did for 10 ms;
//   - retakes Ps whose M sits in a blocking call (PStatus::Syscall) for a
//     sysmon tick while other work waits, or for 10 ms regardless;
//   - asks a G that has run for 10 ms without a scheduling event to yield
//     (preemptone);
//   - replaces the P of an M that is stuck in the kernel without goshim
//     knowing (its thread CPU clock does not advance while its G makes no
//     progress): a spare P takes over its run queue and timers, and the
//     stuck M retires the old P when it next enters the scheduler;
//   - lets Ms that have been idle for long exit when there are many;
//   - prints GOSHIM_DEBUG=schedtrace lines.
#pragma once

#include "core/gmp.hpp"

namespace goshim {

// Starts sysmon (runtime init, after the runtime is up).
void sysmon_start();
// Wakes sysmon early (signal-safe).
void sysmon_wake();
// A blocking call that sysmon should watch from now on (runnable work
// waits for its P): if sysmon is in a backed-off sleep (up to 10 ms), wakes
// it and brings back its 20 us period. One relaxed load when it is not.
// Any thread.
void sysmon_kick();
G* sysmon_g();
// sysmon's kernel thread id (0 until it runs).
pid_t sysmon_tid();
// The state letter /proc shows for kernel thread tid of this process (R
// running or runnable, S asleep, D asleep uninterruptibly, ...), or 0 if
// unknown. Read on the privfd thread (core/privfd.hpp). Any thread, also
// a signal handler; not while holding a runtime lock.
char task_state(pid_t tid);
// Runnable Gs wait on the global queue for an M that newm could not start
// where it was called (newm): sysmon starts one (wakep). Signal-safe.
void sysmon_want_m();

// One line of /proc/self/task/TID/syscall: "NR 0xARG0 ... 0xSP 0xPC" while
// the thread sleeps in a system call, "-1 0xSP 0xPC" when it is blocked
// outside one, "running" otherwise. Sets the call's number and first
// argument; false if the line names no call (exposed for tests).
bool syscall_line_parse(const char* line, uint64_t* nr, uint64_t* arg0);

// sysmon's decisions, split out of its loop (exposed for tests; sysmon only).
//
// One look at pp's scheduling tick (retake, for a P Running or in a
// Syscall): true if pp has had the same slice since the previous look (its
// schedtick unchanged). Otherwise records the new tick and when it was
// seen (sm_schedwhen), forgets the CPU samples of the previous slice and
// returns false: a G that switched in the meantime is neither preempted
// nor counted as stuck.
bool retake_same_slice(P* pp, int64_t now);
// Go's rule for a P whose M has sat in the same blocking call since the
// previous look: it stays with that M (no hand-off) while nothing waits for
// it (its run queue and the global queue empty, an M spinning or a P idle)
// and the call has lasted less than 10 ms.
bool syscall_p_keep(bool runq_empty, int32_t global_runq, int32_t spinning_or_idle, int64_t in_call_ns);
// A G computing through its time slice, to be preempted: a slice of 10 ms
// or more, with CPU time dcpu spent in it, at least half of the slice, or
// some while runnable rather than asleep in the kernel when other
// goroutines exist (asleep(mp) is asked only then).
bool slice_computing(int64_t slice_ns, int64_t dcpu, bool alone, bool (*asleep)(M*), M* mp);
// An M whose G made no scheduling event may be stuck in the kernel: over
// the dt ns since the previous look (at least 20 us) its thread used less
// than half of them on the CPU (dcpu).
bool stall_suspect(int64_t dcpu, int64_t dt);
// sysmon's next sleep: 20 us after a look that found work (idle == 0),
// doubling after 50 idle looks in a row, at most 10 ms.
int64_t sysmon_delay_us(int64_t delay_us, int idle);
// rescue_stranded's decision: whether sysmon starts an M now. stranded:
// gs_stranded(); *wanted: newm asked for one (sysmon_want_m), cleared when
// served or no longer needed; *looks: consecutive stranded looks. Without
// newm's request, only on the second stranded look; never before newm's
// pause after a failure (retry_due, asked only then).
bool rescue_decide(bool stranded, bool* wanted, int* looks, bool (*retry_due)());
// Runnable Gs no M will look for: a P idle, no M spinning, and Gs on the
// global queue or in the ring of a P that is not idle.
bool gs_stranded();

// One look of sysmon at every P (at time now): asks a G computing past its
// slice to yield, moves the work of an M stuck in the kernel, and hands off
// a P whose M sits in a blocking call (PStatus::Syscall): seen in the same
// call at two looks while work waits, or for 10 ms regardless (Go's
// retake). Returns the number of Ps retaken or replaced. sysmon only.
uint32_t sysmon_retake(int64_t now);

// In a fork child, before sysmon_start (fork.hpp).
void sysmon_after_fork();

// Hooks for the observability layer: called by sysmon every tick and when a
// stalled M is found (may be null).
extern void (*sysmon_tick_hook)(int64_t now);
extern void (*sysmon_stall_hook)(M* mp, G* gp, int64_t stalled_ns);
// Called once per stall, while the M is still stuck, when the stall has
// lasted sysmon_pinned_ns (0: never): the pinning report.
extern void (*sysmon_pinned_hook)(M* mp, G* gp, int64_t stalled_ns);
extern int64_t sysmon_pinned_ns;

}  // namespace goshim
