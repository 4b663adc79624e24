// Typed raw system calls (see sys.hpp for the contract).
#include "syscalls/sys.hpp"

#include <linux/futex.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>

#include "core/real.hpp"

namespace goshim::sys {

long futex_wait(const void* addr, uint32_t val, const struct timespec* rel) {
  return raw4(SYS_futex, (long)addr, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, (long)val, (long)rel);
}

long futex_wait_abs(const void* addr, uint32_t val, const struct timespec* abs_mono) {
  return raw6(SYS_futex, (long)addr, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, (long)val,
              (long)abs_mono, 0, (long)FUTEX_BITSET_MATCH_ANY);
}

long futex_wake(const void* addr, int n) {
  return raw3(SYS_futex, (long)addr, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n);
}

long futex_wait_shared(const void* addr, uint32_t val, const struct timespec* rel) {
  return raw4(SYS_futex, (long)addr, FUTEX_WAIT, (long)val, (long)rel);
}

long futex_wake_shared(const void* addr, int n) {
  return raw3(SYS_futex, (long)addr, FUTEX_WAKE, n);
}

long futex(const void* addr, int op, uint32_t val, const void* timeout, const void* addr2,
           uint32_t val3) {
  return raw6(SYS_futex, (long)addr, op, (long)val, (long)timeout, (long)addr2, (long)val3);
}

void* mmap(void* addr, size_t len, int prot, int flags, int fd, long off) {
  long r = raw6(SYS_mmap, (long)addr, (long)len, prot, flags, fd, off);
  if (r < 0 && r > -4096) return MAP_FAILED;
  return (void*)r;
}

long munmap(void* addr, size_t len) { return raw2(SYS_munmap, (long)addr, (long)len); }
long mprotect(void* addr, size_t len, int prot) {
  return raw3(SYS_mprotect, (long)addr, (long)len, prot);
}
long madvise(void* addr, size_t len, int advice) {
  return raw3(SYS_madvise, (long)addr, (long)len, advice);
}
long process_madvise_self(const struct iovec* ranges, size_t n, int advice) {
#ifdef SYS_process_madvise
  constexpr long kPidfdSelf = -10000;  // PIDFD_SELF (PIDFD_SELF_THREAD: the same mm)
  return raw5(SYS_process_madvise, kPidfdSelf, (long)ranges, (long)n, advice, 0);
#else
  (void)ranges, (void)n, (void)advice;
  return -ENOSYS;
#endif
}

long write(int fd, const void* buf, size_t n) { return raw3(SYS_write, fd, (long)buf, (long)n); }
long read(int fd, void* buf, size_t n) { return raw3(SYS_read, fd, (long)buf, (long)n); }
long close(int fd) { return raw1(SYS_close, fd); }
long openat(int dirfd, const char* path, int flags, int mode) {
  return raw4(SYS_openat, dirfd, (long)path, flags, mode);
}

long gettid() { return raw0(SYS_gettid); }
long getpid() { return raw0(SYS_getpid); }

bool read_self(void* dst, const void* src, size_t n) {
  struct iovec local = {dst, n}, remote = {(void*)src, n};
  return raw6(SYS_process_vm_readv, getpid(), (long)&local, 1, (long)&remote, 1, 0) == (long)n;
}

bool write_self(void* dst, const void* src, size_t n) {
  struct iovec local = {(void*)src, n}, remote = {dst, n};
  return raw6(SYS_process_vm_writev, getpid(), (long)&local, 1, (long)&remote, 1, 0) == (long)n;
}
long tgkill(long tgid, long tid, int sig) { return raw3(SYS_tgkill, tgid, tid, sig); }
long sched_yield() { return raw0(SYS_sched_yield); }
long sched_setscheduler(long pid, int policy, const void* param) {
  return raw3(SYS_sched_setscheduler, pid, policy, (long)param);
}
long sched_getscheduler(long pid) { return raw1(SYS_sched_getscheduler, pid); }
long sched_getparam(long pid, void* param) { return raw2(SYS_sched_getparam, pid, (long)param); }
long sched_getaffinity(long pid, size_t size, void* mask) {
  return raw3(SYS_sched_getaffinity, pid, (long)size, (long)mask);
}
long nanosleep(const struct timespec* req, struct timespec* rem) {
  return raw2(SYS_nanosleep, (long)req, (long)rem);
}

void exit_group(int code) {
  for (;;) raw1(SYS_exit_group, code);
}
void exit_thread(int code) {
  for (;;) raw1(SYS_exit, code);
}

long epoll_create1(int flags) { return raw1(SYS_epoll_create1, flags); }
long epoll_ctl(int epfd, int op, int fd, struct epoll_event* ev) {
  return raw4(SYS_epoll_ctl, epfd, op, fd, (long)ev);
}
long epoll_wait(int epfd, struct epoll_event* evs, int max, int timeout_ms) {
#ifdef SYS_epoll_wait
  return raw4(SYS_epoll_wait, epfd, (long)evs, max, timeout_ms);
#else  // the generic table (aarch64) has only epoll_pwait
  return raw6(SYS_epoll_pwait, epfd, (long)evs, max, timeout_ms, 0, 8);
#endif
}
long eventfd2(unsigned initval, int flags) { return raw2(SYS_eventfd2, initval, flags); }

#if defined(__x86_64__)
long arch_prctl(int code, unsigned long addr) { return raw2(SYS_arch_prctl, code, (long)addr); }
#endif
long rseq(void* area, uint32_t len, int flags, uint32_t sig) {
  return raw4(SYS_rseq, (long)area, len, flags, sig);
}
long set_robust_list(void* head, size_t len) {
  return raw2(SYS_set_robust_list, (long)head, (long)len);
}
long get_robust_list(int pid, void** head, size_t* len) {
  return raw3(SYS_get_robust_list, pid, (long)head, (long)len);
}
long set_tid_address(int* tidptr) { return raw1(SYS_set_tid_address, (long)tidptr); }
long rt_sigprocmask(int how, const void* set, void* old, size_t sigsetsize) {
  return raw4(SYS_rt_sigprocmask, how, (long)set, (long)old, (long)sigsetsize);
}
long prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5) {
  return raw5(SYS_prctl, option, (long)a2, (long)a3, (long)a4, (long)a5);
}

// clock_gettime goes through libc so that it uses the vDSO (about 20 ns
// instead of a syscall). glibc's clock_gettime touches no TLS and takes no
// lock. goshim interposes clock_gettime (per-goroutine CPU clocks, shim/
// cpuclock.cpp), and -Bsymbolic-functions would bind ::clock_gettime here
// to that interposer: glibc's own name for it, __clock_gettime, is used,
// found at run time (core/real.hpp's table; the one place it is named).
// Without it (a libc that does not define it) the system call, without
// the vDSO.
long clock_gettime(int clk, struct timespec* ts) {
  auto fn = real::lazy::__clock_gettime();
  if (__builtin_expect(fn != nullptr, 1)) return fn(clk, ts);
  long r = raw2(SYS_clock_gettime, clk, (long)ts);
  if (r < 0) {
    errno = (int)-r;
    return -1;
  }
  return 0;
}

long getrusage_thread(struct rusage* ru) { return raw2(SYS_getrusage, RUSAGE_THREAD, (long)ru); }

int64_t nanotime() {
  struct timespec ts;
  sys::clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t coarsetime() {
  struct timespec ts;
  sys::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t walltime() {
  struct timespec ts;
  sys::clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

}  // namespace goshim::sys
