// goshim's file reads that must not touch the program's fd table.
//
// goshim reads /proc while the program runs: sysmon looks at a kernel
// thread's state, the memory classifier asks /proc/self/maps whether a
// futex word is shared, a credential change lists /proc/self/task, the
// debug reports read /proc/self/status. Each read opens a file. Opened in
// the process's fd table, the file takes the lowest free number for a
// moment, and the program sees it: a daemon that closes 0-2 and opens
// /dev/null three times does not get 0, 1 and 2; close_range(3, ~0U)
// followed by a scan of fcntl(F_GETFD) finds an fd it never opened; a
// program that closes every number closes goshim's file under it.
//
// So these reads run on a kernel thread of goshim's whose fd table is its
// own (unshare(CLONE_FILES) at its start, then emptied): nothing goshim
// opens there has a number in the program's table, not even for an
// instant. Callers hand it a function and wait (a futex) for the result.
//
// The thread starts when the process (or a fork child) creates its first
// thread, on its only goroutine inside pthread_create, before the second
// goroutine exists; not at the first read that needs it while threads
// run: its private table begins as a copy of the program's (the kernel has
// no other way to give a thread an empty one), which holds every open file
// until the thread has emptied it. Started while threads ran, that copy
// kept a pipe end one thread had just closed open for that moment: a write
// into a pipe whose reader was closed succeeded, a read of one whose writer
// was closed found no end-of-file (tests/preload/pipe_close_release).
// Started while no other code of the program runs, the copy changes
// nothing anyone can see. Not at every start nor in every fork child: a
// process that never makes a thread needs it rarely, most fork children
// exec at once, and with thousands of descriptors the copy and the
// emptying doubled the cost of a fork and exec. Until it runs (before the
// runtime, in 1:1 mode, when the kernel refuses a thread or unshare) the
// function runs on the caller, as before; sysmon may still start it for
// a process with one goroutine (to look at that goroutine's kernel thread,
// stuck in a system call: the copy is made while that thread waits there),
// and a goroutine while the process has others after a refused start.
#pragma once

#include <stddef.h>

namespace goshim {

// Runs fn(arg) where goshim's fds are invisible to the program and returns
// its result. fn may only make system calls (no goshim lock, no malloc, no
// call into the program); it runs with every signal but the credential
// broadcast blocked. Any thread, also a signal handler; blocks the caller
// (holding its P, like the system calls it replaces) until fn returns.
long privfd_run(long (*fn)(void*), void* arg);

// Reads the file at path (up to size - 1 bytes, one read) into buf and
// NUL-terminates it. Returns the length, or -errno.
long privfd_read(const char* path, char* buf, size_t size);

// Starts the thread now if the caller may (see privfd_run) and it does
// not run yet: before a caller takes a lock the start would wait for
// (setxid_all's broadcast: a thread created during it waits for its end).
void privfd_prepare();
// Starts the thread now (runtime init and fork child of a program with its
// own allocator, before the program goes on).
void privfd_start();
// On the process's only goroutine, about to create the second (a fork
// child's first thread, or after a refused start): starts the thread if
// it does not run.
void privfd_before_second_goroutine();
// In a fork child (the thread did not survive): it starts at the child's
// first thread creation (privfd_before_second_goroutine).
void privfd_after_fork();

// Whether the calling thread is the privfd thread (tests, contracts).
bool privfd_on_thread();
// Kernel threads the privfd mechanism runs now (0 or 1): goshim's own,
// not the program's (the deadlock check counts the others).
int privfd_threads();

}  // namespace goshim
