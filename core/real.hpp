// The real libc/libpthread functions that goshim interposes, resolved with
// dlsym(RTLD_NEXT). core/ uses them where it must create or manage real
// kernel threads (Ms, the probe thread); shim/ uses them for pass-through
// (before init, on foreign threads, in 1:1 mode).
#pragma once

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <time.h>

namespace goshim::real {

#define GOSHIM_REAL_FUNCS(X)                                                                  \
  X(int, pthread_create, (pthread_t*, const pthread_attr_t*, void* (*)(void*), void*))        \
  X(int, pthread_join, (pthread_t, void**))                                                  \
  X(int, pthread_tryjoin_np, (pthread_t, void**))                                            \
  X(int, pthread_timedjoin_np, (pthread_t, void**, const struct timespec*))                  \
  X(int, pthread_clockjoin_np, (pthread_t, void**, clockid_t, const struct timespec*))       \
  X(int, pthread_detach, (pthread_t))                                                        \
  X(void, pthread_exit, (void*))                                                             \
  X(int, pthread_getattr_np, (pthread_t, pthread_attr_t*))                                   \
  X(int, pthread_setname_np, (pthread_t, const char*))                                       \
  X(int, pthread_getname_np, (pthread_t, char*, size_t))                                     \
  X(int, pthread_getcpuclockid, (pthread_t, clockid_t*))                                     \
  X(int, clock_getres, (clockid_t, struct timespec*))                                        \
  X(int, getrusage, (int, struct rusage*))                                                   \
  X(int, pthread_setaffinity_np, (pthread_t, size_t, const cpu_set_t*))                      \
  X(int, pthread_getaffinity_np, (pthread_t, size_t, cpu_set_t*))                            \
  X(int, pthread_setschedparam, (pthread_t, int, const struct sched_param*))                 \
  X(int, pthread_getschedparam, (pthread_t, int*, struct sched_param*))                      \
  X(int, pthread_setschedprio, (pthread_t, int))                                             \
  X(int, pthread_kill, (pthread_t, int))                                                     \
  X(int, pthread_sigqueue, (pthread_t, int, const union sigval))                             \
  X(int, pthread_cancel, (pthread_t))                                                        \
  X(int, pthread_once, (pthread_once_t*, void (*)(void)))                                    \
  X(void, pthread_testcancel, (void))                                                        \
  X(int, pthread_sigmask, (int, const sigset_t*, sigset_t*))                                 \
  X(int, sigprocmask, (int, const sigset_t*, sigset_t*))                                     \
  X(int, raise, (int))                                                                       \
  X(int, sigpending, (sigset_t*))                                                            \
  X(int, sigaltstack, (const stack_t*, stack_t*))                                            \
  X(int, sigwait, (const sigset_t*, int*))                                                   \
  X(int, sigwaitinfo, (const sigset_t*, siginfo_t*))                                         \
  X(int, sigtimedwait, (const sigset_t*, siginfo_t*, const struct timespec*))                \
  X(int, sigsuspend, (const sigset_t*))                                                      \
  X(int, pause, (void))                                                                      \
  X(int, sched_yield, (void))                                                                \
  X(void*, dlopen, (const char*, int))                                                       \
  X(void*, dlmopen, (long, const char*, int))                                                \
  X(sem_t*, sem_open, (const char*, int, ...))                                               \
  X(int, sem_close, (sem_t*))                                                                \
  X(int, sem_unlink, (const char*))

#define GOSHIM_REAL_DECL(ret, name, args) extern ret(*name) args;
GOSHIM_REAL_FUNCS(GOSHIM_REAL_DECL)
#undef GOSHIM_REAL_DECL

// Resolves every entry. Safe to call more than once and from any thread.
void resolve();
// True while resolve() runs: glibc before 2.34 callocs in dlsym, and
// jemalloc's first allocation reads /proc and /sys files through the
// interposed syscall(); those calls must not resolve again.
bool resolving();

}  // namespace goshim::real
