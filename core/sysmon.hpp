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
