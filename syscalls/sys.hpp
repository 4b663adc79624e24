// Typed raw system calls: the only way core/ reaches the kernel.
//
// Every function here returns the kernel's result (>= 0, or -errno) and never
// touches errno, so it is usable on g0, without a P, in a signal handler and
// before the runtime is up. Nothing here allocates or takes a lock.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

#if defined(__x86_64__)
#include "syscalls/raw_x86_64.hpp"
#elif defined(__aarch64__)
#include "syscalls/raw_aarch64.hpp"
#else
#error "goshim: no raw syscall layer for this architecture"
#endif

struct epoll_event;
struct iovec;

namespace goshim::sys {

// futex(2) operations used by the runtime (always PRIVATE unless noted).
long futex_wait(const void* addr, uint32_t val, const struct timespec* rel);
long futex_wait_abs(const void* addr, uint32_t val, const struct timespec* abs_mono);
long futex_wake(const void* addr, int n);
long futex_wait_shared(const void* addr, uint32_t val, const struct timespec* rel);
long futex_wake_shared(const void* addr, int n);
// Any futex operation, arguments as futex(2) takes them.
long futex(const void* addr, int op, uint32_t val, const void* timeout, const void* addr2,
           uint32_t val3);

void* mmap(void* addr, size_t len, int prot, int flags, int fd, long off);  // MAP_FAILED on error
long munmap(void* addr, size_t len);
long mprotect(void* addr, size_t len, int prot);
long madvise(void* addr, size_t len, int advice);
// process_madvise(2) on the calling process (PIDFD_SELF, Linux 6.14+; any
// advice on oneself since 6.13): `advice` on each of n ranges in one call.
// Returns the bytes advised (short when a range failed), or -errno.
long process_madvise_self(const struct iovec* ranges, size_t n, int advice);

long write(int fd, const void* buf, size_t n);
long read(int fd, void* buf, size_t n);
long close(int fd);
long openat(int dirfd, const char* path, int flags, int mode);

long gettid();
long getpid();
long tgkill(long tgid, long tid, int sig);
long sched_yield();
long sched_setscheduler(long pid, int policy, const void* param);
long sched_getscheduler(long pid);
long sched_getparam(long pid, void* param);
long sched_getaffinity(long pid, size_t size, void* mask);
long nanosleep(const struct timespec* req, struct timespec* rem);
long clock_gettime(int clk, struct timespec* ts);  // vDSO through libc; never blocks
long getrusage_thread(struct rusage* ru);  // getrusage(RUSAGE_THREAD), the system call
[[noreturn]] void exit_group(int code);
[[noreturn]] void exit_thread(int code);

long epoll_create1(int flags);
long epoll_ctl(int epfd, int op, int fd, struct epoll_event* ev);
long epoll_wait(int epfd, struct epoll_event* evs, int max, int timeout_ms);
long eventfd2(unsigned initval, int flags);

#if defined(__x86_64__)
long arch_prctl(int code, unsigned long addr);
#endif
long rseq(void* area, uint32_t len, int flags, uint32_t sig);
long set_robust_list(void* head, size_t len);
long get_robust_list(int pid, void** head, size_t* len);
long set_tid_address(int* tidptr);
long rt_sigprocmask(int how, const void* set, void* old, size_t sigsetsize);
long prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5);

// Copies n bytes of this process's memory without faulting
// (process_vm_readv/writev on the own pid: an unmapped, unreadable or
// unwritable address is a failed call, not a signal). True when all n
// bytes were copied. For memory goshim does not own: the program's
// pointers, stacks it scans, other libraries' lists.
bool read_self(void* dst, const void* src, size_t n);   // dst in goshim's memory
bool write_self(void* dst, const void* src, size_t n);  // src in goshim's memory

// Monotonic nanoseconds (CLOCK_MONOTONIC), the runtime's only time base.
int64_t nanotime();
// Monotonic nanoseconds at jiffy resolution (CLOCK_MONOTONIC_COARSE):
// a few ns through the vDSO, for timestamps that need not be precise.
int64_t coarsetime();
// Wall-clock nanoseconds (CLOCK_REALTIME).
int64_t walltime();

}  // namespace goshim::sys
