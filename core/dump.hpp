// Goroutine dumps: every G with its id, state (running, runnable, waiting
// on what: mutex/cond/sema address, fd and direction, timer, blocking call
// name), how long it has waited, its creator and a native backtrace with
// symbol names, like a Go panic dump or a JVM thread dump.
//
// Parked and runnable Gs are unwound (libunwind) from their saved context;
// a G running on another M is asked, through the preemption signal, to
// record its own backtrace from its signal frame. The program keeps running.
#pragma once

#include "core/gmp.hpp"

namespace goshim {

// Looks goshim's own code range up (runtime init, on G1); the unwinder is
// set up later (dump_unwinder_init).
void dump_init();

// Writes a dump of all goroutines to fd. Without P (sysmon), no runtime
// lock held. Allocates nothing.
void dump_goroutines(int fd, const char* title);

// Writes one goroutine's entry (header, backtrace, creator) to fd. Same
// contract as dump_goroutines.
void dump_goroutine(int fd, G* gp);

// Signal context, on the M that runs gp: records gp's backtrace from the
// interrupted frame for a dump in progress.
void dump_capture_running(G* gp, void* ucontext);

// Writes gp's backtrace, starting at the interrupted context uc (or at its
// saved context when uc is null and gp is parked), to fd.
void dump_backtrace(int fd, G* gp, void* uc);

// Writes the backtrace of the caller's own frame to fd (skip frames).
void dump_backtrace_here(int fd, int skip);

// Signal context: a SIGSEGV/SIGBUS while the dumper reads a stack that
// changed under it. Returns false if this fault is not the dumper's (else
// does not return).
bool dump_fault_guard();

// Whether pc lies in libgoshim's own code.
bool dladdr_is_self(uintptr_t pc);

// Signal context, on the M that runs gp, the interrupted frame on gp's
// stack: walks the frames from the interrupted context outwards and
// returns true when one of the program's own code (not goshim, not a
// library goshim calls into: pc_unsafe) comes before any of goshim's;
// false when goshim's code is the caller (a vDSO clock read or a libc
// string function called by the runtime, maybe under a lock) or the walk
// cannot tell within a few frames.
bool dump_program_frame_first(G* gp, void* ucontext);

// Sets libunwind up (its caching policy, its first step and the pipe it
// makes, as goshim's own fd), once: at the first goroutine creation, the
// first cancellation sent and the first dump, not at every process start
// (its set-up cleared 14 pages of libunwind's cache at every start of
// every preloaded program, threads or not). Not in a signal handler but as
// a last resort (the paths that unwind there come after one of those).
void dump_unwinder_init();

// Requests a dump from sysmon (signal-safe).
void dump_request();
bool dump_requested();

}  // namespace goshim
