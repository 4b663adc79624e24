// fork under M:N (DESIGN.md decision 11).
//
// The child of fork has one kernel thread: the M that called fork, running
// the goroutine that called it. Everything else the child inherited from
// the runtime describes threads that do not exist there: other Ms, other
// Gs, run queues, timers, sema waiters, the parent's epoll registrations,
// locks that other Ms may have held. Rather than stopping the world in the
// parent (glibc's prepare handlers may park the caller on a contended
// mutex, so the runtime cannot hold its locks across them), the child
// rebuilds the runtime from scratch in its first atfork child handler:
// locks re-initialized, queues emptied, the other Gs marked gone, a new
// epoll instance, a new sysmon, this M alone. The memory of the vanished
// Gs (stacks, TLS blocks) is not reused; a child usually execs soon.
//
// Each module that keeps state resets it in a hook registered here.
#pragma once

namespace goshim {

// Registers the child handler with glibc's pthread_atfork (runtime init).
void fork_init();

// 1:1 mode (goshim refused M:N, or GOSHIM_MODE=1:1): registers
// fork_child_reset_1to1 as an atfork child handler (runtime_init, once).
void fork_init_1to1();

// 1:1 mode, in a fork child (only the forking thread): resets the state
// 1:1 mode keeps for all threads (the fd table, the semaphore buckets).
// Runs once per child (glibc's handler, or the shim's fork wrappers for
// _Fork, which runs no handlers).
void fork_child_reset_1to1();

// Adds fn to the hooks run in the child (in registration order). Call
// during initialization; at most 32 hooks.
void register_fork_child_hook(void (*fn)());

// Whether this process is a fork child whose runtime was already reset
// (the shim's fork wrapper runs the reset itself if glibc did not).
void fork_child_reset();

// Starts goshim's own threads in a fork child (privfd, the M starter,
// sysmon), at the end of fork_child_reset or, when deferred, by
// fork_wrapper_end.
void fork_child_start_threads();

// Around glibc's fork in the shim's fork wrappers (calling thread): with
// the program's own allocator, a child's threads are started by
// fork_wrapper_end(true), after the program's atfork child handlers, not
// in goshim's handler, which runs before them (fork.cpp).
void fork_wrapper_begin();
void fork_wrapper_end(bool child);

// Whether this process is the child of a fork of a goshim process (its
// runtime was reset): its open file descriptions may be shared with the
// parent. Any thread, signal-safe.
bool fork_is_child();

}  // namespace goshim
