// Process-wide credential changes (setuid family, setgroups).
//
// Linux applies credentials per kernel thread; glibc makes a change
// process-wide by signalling every thread it knows (SIGSETXID) and having
// each handler clear a bit in THREAD_SELF. Under M:N, THREAD_SELF is a
// goroutine's TCB, the bit is never cleared and glibc's initiator signals
// forever (TLS.md pitfall 2). goshim does the broadcast itself: the call is
// applied to the calling thread first (if that fails, nothing changed and
// the error is returned), then, through a handler on the same signal
// (SIGSETXID, 33, which programs cannot use), to every other kernel thread
// of the process as listed by /proc/self/task, until a listing shows no
// thread left out. A thread that then fails where the caller succeeded
// means the process would be left with mixed credentials: like glibc,
// goshim aborts rather than continue.
#pragma once

namespace goshim {

// Installs the broadcast handler (runtime init).
void setxid_init();

// Performs system call nr(a0, a1, a2) on every kernel thread of the process.
// Returns the raw result (>= 0 or -errno) of the calling thread's call.
// Any thread.
long setxid_all(long nr, long a0, long a1, long a2);

// In a fork child (fork.hpp).
void setxid_after_fork();

// Blocks the creation of Ms while a broadcast runs (newm calls these).
void setxid_thread_create_begin();
void setxid_thread_create_end();

}  // namespace goshim
