// goshim's own file descriptors (the netpoller's epoll instance and
// eventfd, the trace file, the unwinder's pipe): numbers the program never
// opened. The program must see them as closed (close gives EBADF,
// close_range and closefrom leave them open, fcntl and dup on them give
// EBADF) and may take their numbers (dup2, dup3, F_DUPFD onto them): goshim
// then moves its fd to another number first (ownfd_vacate) and keeps
// working.
//
// They live high in the fd space (ownfd_place), so the program's own fds
// get the numbers they get natively (the first open returns 3).
#pragma once

#include <atomic>

namespace goshim {

// Moves a freshly created internal fd to a high number (F_DUPFD_CLOEXEC)
// and closes the original. Returns the new number (fd itself if it cannot
// be moved). Any thread.
int ownfd_place(int fd);
// Grows the kernel's fd table now to the soft RLIMIT_NOFILE (when that is
// above 1024 and at most 65536; runtime init). A table that grows later,
// with many threads, makes every thread that allocates an fd meanwhile wait
// for an RCU grace period (expand_files): milliseconds, tens of them on a
// busy machine, during which an M sits in socket() or open() holding its
// P. Grown while the process has one thread, it costs no wait, and a
// thread-per-connection server never meets the stall again (unless it
// raises its limit). The cost: 8 bytes of kernel memory per slot.
void ownfd_presize_table();
// Registers a variable of goshim's that holds one of its fds (-1: none
// now). Every reader of the variable must load it anew for each use: it
// changes when the number is vacated. At most 16 variables. Any thread.
void ownfd_add(std::atomic<int>* var);
// Registers a number held by a library goshim uses (which cannot be told
// about a move): it is hidden from the program like the others, and given
// up (forgotten) when the program takes its number.
void ownfd_add_fixed(int fd);
// Whether fd is one of goshim's own (racy; any thread, signal-safe).
bool ownfd_is(int fd);
// Before the program's fd takes number fd (dup2, dup3): if fd is one of
// goshim's, moves it elsewhere (the caller's dup replaces the old number).
// 0, or -errno if it could not be moved (then the caller must fail).
long ownfd_vacate(int fd);
// goshim's own numbers in [lo, hi], sorted, at most max. Returns the count.
int ownfd_in_range(unsigned lo, unsigned hi, int* out, int max);

// While this thread runs the unwinder's initialization, the pipe it
// creates is goshim's own (fdops' pipe2 asks ownfd_capturing()).
void ownfd_capture_begin();
void ownfd_capture_end();
bool ownfd_capturing();

}  // namespace goshim
