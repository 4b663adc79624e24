// The next-in-chain (real) libc functions and the glibc symbols goshim looks
// up at run time: one table, one resolver, one cache.
//
// Every symbol goshim finds at run time is one line of GOSHIM_REAL_TABLE:
//
//   X(name, type, scope, version, since)
//
//   name     the symbol (also the name of its cache, real::name)
//   type     the cache's type: a function pointer for functions, a pointer
//            for data, intptr_t (the offset from the thread pointer) for a
//            TLS variable (scope AnyTls)
//   scope    Next: what dlsym(RTLD_NEXT) would give libgoshim.so (the
//                  definition after goshim's in the global scope: the real
//                  function behind an interposer) with glibc 2.36's rule:
//                  the default version (before 2.36 dlsym(RTLD_NEXT) took
//                  the oldest, glibc bug 14932: posix_spawn@GLIBC_2.2.5,
//                  a compat version, where programs bind to @@GLIBC_2.15);
//            Any:  what dlsym(RTLD_DEFAULT) / dlvsym(RTLD_DEFAULT) would give;
//            AnyTls: the same for a TLS variable
//   version  nullptr (the default version, as dlsym) or the version name
//            (as dlvsym)
//   since    the glibc release (major*100+minor) from which the libraries
//            every goshim process loads (libc, libpthread, ld.so) define
//            it; 0: every supported glibc. Only the unit test reads it.
//
// The resolver (real.cpp) reads the loaded objects' dynamic symbol tables
// itself (dl_iterate_phdr, GNU/SysV hash, symbol versions) with glibc's
// matching rules: it never calls dlsym (which callocs before glibc 2.34,
// booting jemalloc and re-entering goshim's interposers), takes no lock of
// goshim's, allocates nothing and touches no errno. So it may run at any
// time: before goshim's constructor (a library constructor or jemalloc's
// boot calling an interposer), on a foreign thread, under goshim's locks.
//
// resolve() fills every entry at once (goshim's constructor calls it, while
// the process has only its start-up objects); an entry found missing then is
// looked up again on each use through real::lazy:: (a library loaded later
// with RTLD_GLOBAL may define it). Assumption: an object loaded with
// RTLD_LOCAL before the first resolution would be searched (dlsym would
// not); goshim's constructor normally runs before any program code.
#pragma once

#include <dirent.h>
#include <mqueue.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#include <type_traits>

namespace goshim::real {

#define GOSHIM_REAL_TABLE(X)                                                                       \
  /* threads (core/proc.cpp, runtime.cpp, shim/thread*.cpp) */                                    \
  X(pthread_create, int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*), Next,     \
    nullptr, 0)                                                                                    \
  X(pthread_join, int (*)(pthread_t, void**), Next, nullptr, 0)                                    \
  X(pthread_tryjoin_np, int (*)(pthread_t, void**), Next, nullptr, 0)                              \
  X(pthread_timedjoin_np, int (*)(pthread_t, void**, const struct timespec*), Next, nullptr, 0)    \
  X(pthread_clockjoin_np, int (*)(pthread_t, void**, clockid_t, const struct timespec*), Next,     \
    nullptr, 231)                                                                                  \
  X(pthread_detach, int (*)(pthread_t), Next, nullptr, 0)                                          \
  X(pthread_exit, void (*)(void*), Next, nullptr, 0)                                               \
  X(pthread_getattr_np, int (*)(pthread_t, pthread_attr_t*), Next, nullptr, 0)                     \
  X(pthread_getattr_default_np, int (*)(pthread_attr_t*), Next, nullptr, 0)                        \
  X(pthread_setattr_default_np, int (*)(const pthread_attr_t*), Next, nullptr, 0)                  \
  X(pthread_attr_destroy, int (*)(pthread_attr_t*), Next, nullptr, 0)                              \
  X(pthread_attr_setaffinity_np, int (*)(pthread_attr_t*, size_t, const cpu_set_t*), Next,         \
    nullptr, 0)                                                                                    \
  X(pthread_attr_getaffinity_np, int (*)(const pthread_attr_t*, size_t, cpu_set_t*), Next,         \
    nullptr, 0)                                                                                    \
  X(pthread_attr_setsigmask_np, int (*)(pthread_attr_t*, const sigset_t*), Next, nullptr, 232)     \
  X(pthread_setname_np, int (*)(pthread_t, const char*), Next, nullptr, 0)                         \
  X(pthread_getname_np, int (*)(pthread_t, char*, size_t), Next, nullptr, 0)                       \
  X(pthread_getcpuclockid, int (*)(pthread_t, clockid_t*), Next, nullptr, 0)                       \
  X(clock_getres, int (*)(clockid_t, struct timespec*), Next, nullptr, 0)                          \
  X(getrusage, int (*)(int, struct rusage*), Next, nullptr, 0)                                     \
  X(pthread_setaffinity_np, int (*)(pthread_t, size_t, const cpu_set_t*), Next, nullptr, 0)        \
  X(pthread_getaffinity_np, int (*)(pthread_t, size_t, cpu_set_t*), Next, nullptr, 0)              \
  X(pthread_setschedparam, int (*)(pthread_t, int, const struct sched_param*), Next, nullptr, 0)   \
  X(pthread_getschedparam, int (*)(pthread_t, int*, struct sched_param*), Next, nullptr, 0)        \
  X(pthread_setschedprio, int (*)(pthread_t, int), Next, nullptr, 0)                               \
  X(pthread_kill, int (*)(pthread_t, int), Next, nullptr, 0)                                       \
  X(pthread_sigqueue, int (*)(pthread_t, int, const union sigval), Next, nullptr, 0)               \
  X(pthread_cancel, int (*)(pthread_t), Next, nullptr, 0)                                          \
  X(pthread_once, int (*)(pthread_once_t*, void (*)(void)), Next, nullptr, 0)                      \
  X(pthread_testcancel, void (*)(void), Next, nullptr, 0)                                          \
  X(sched_yield, int (*)(void), Next, nullptr, 0)                                                  \
  X(__libc_start_main,                                                                             \
    int (*)(int (*)(int, char**, char**), int, char**, void (*)(void), void (*)(void),             \
            void (*)(void), void*),                                                                \
    Next, nullptr, 0)                                                                              \
  X(fork, pid_t (*)(void), Next, nullptr, 0)                                                       \
  X(_Fork, pid_t (*)(void), Next, nullptr, 234)                                                    \
  /* thread-specific data (shim/pthread_key.cpp) */                                                \
  X(pthread_key_create, int (*)(pthread_key_t*, void (*)(void*)), Next, nullptr, 0)                \
  X(pthread_key_delete, int (*)(pthread_key_t), Next, nullptr, 0)                                  \
  X(pthread_getspecific, void* (*)(pthread_key_t), Next, nullptr, 0)                               \
  X(pthread_setspecific, int (*)(pthread_key_t, const void*), Next, nullptr, 0)                    \
  /* glibc's condition variables, the default versions (GLIBC_2.3.2; the                        \
     versioned lookup that tests/unit/real_test checks) */                                         \
  X(pthread_cond_init, int (*)(pthread_cond_t*, const pthread_condattr_t*), Next, nullptr, 0)      \
  X(pthread_cond_signal, int (*)(pthread_cond_t*), Next, nullptr, 0)                               \
  X(pthread_cond_wait, int (*)(pthread_cond_t*, pthread_mutex_t*), Next, nullptr, 0)               \
  X(pthread_cond_timedwait,                                                                        \
    int (*)(pthread_cond_t*, pthread_mutex_t*, const struct timespec*), Next, nullptr, 0)          \
  /* signals (core/signal.cpp, shim/signal*.cpp, core/cancelproto.cpp) */                          \
  X(sigaction, int (*)(int, const struct sigaction*, struct sigaction*), Next, nullptr, 0)         \
  X(pthread_sigmask, int (*)(int, const sigset_t*, sigset_t*), Next, nullptr, 0)                   \
  X(sigprocmask, int (*)(int, const sigset_t*, sigset_t*), Next, nullptr, 0)                       \
  X(raise, int (*)(int), Next, nullptr, 0)                                                         \
  X(abort, void (*)(void), Next, nullptr, 0)                                                       \
  X(sigpending, int (*)(sigset_t*), Next, nullptr, 0)                                              \
  X(sigaltstack, int (*)(const stack_t*, stack_t*), Next, nullptr, 0)                              \
  X(longjmp, void (*)(struct __jmp_buf_tag*, int), Next, nullptr, 0)                              \
  X(_longjmp, void (*)(struct __jmp_buf_tag*, int), Next, nullptr, 0)                             \
  X(siglongjmp, void (*)(struct __jmp_buf_tag*, int), Next, nullptr, 0)                           \
  X(__longjmp_chk, void (*)(struct __jmp_buf_tag*, int), Next, nullptr, 0)                        \
  X(sigwait, int (*)(const sigset_t*, int*), Next, nullptr, 0)                                     \
  X(sigwaitinfo, int (*)(const sigset_t*, siginfo_t*), Next, nullptr, 0)                           \
  X(sigtimedwait, int (*)(const sigset_t*, siginfo_t*, const struct timespec*), Next, nullptr, 0)  \
  X(sigsuspend, int (*)(const sigset_t*), Next, nullptr, 0)                                        \
  X(pause, int (*)(void), Next, nullptr, 0)                                                        \
  /* credentials (shim/credentials.cpp) */                                                         \
  X(setuid, int (*)(uid_t), Next, nullptr, 0)                                                      \
  X(setgid, int (*)(gid_t), Next, nullptr, 0)                                                      \
  X(setreuid, int (*)(uid_t, uid_t), Next, nullptr, 0)                                             \
  X(setregid, int (*)(gid_t, gid_t), Next, nullptr, 0)                                             \
  X(setresuid, int (*)(uid_t, uid_t, uid_t), Next, nullptr, 0)                                     \
  X(setresgid, int (*)(gid_t, gid_t, gid_t), Next, nullptr, 0)                                     \
  X(setgroups, int (*)(size_t, const gid_t*), Next, nullptr, 0)                                    \
  X(initgroups, int (*)(const char*, gid_t), Next, nullptr, 0)                                     \
  /* dynamic loading, named semaphores */                                                          \
  X(dlopen, void* (*)(const char*, int), Next, nullptr, 0)                                         \
  X(dlmopen, void* (*)(long, const char*, int), Next, nullptr, 0)                                  \
  X(sem_open, sem_t* (*)(const char*, int, ...), Next, nullptr, 0)                                 \
  X(sem_close, int (*)(sem_t*), Next, nullptr, 0)                                                  \
  X(sem_unlink, int (*)(const char*), Next, nullptr, 0)                                            \
  /* the fd layer (core/fdio.cpp, fdops.cpp, shim/file_io.cpp, socket_io.cpp, ...) */         \
  X(read, ssize_t (*)(int, void*, size_t), Next, nullptr, 0)                                       \
  X(write, ssize_t (*)(int, const void*, size_t), Next, nullptr, 0)                                \
  X(readv, ssize_t (*)(int, const struct iovec*, int), Next, nullptr, 0)                           \
  X(writev, ssize_t (*)(int, const struct iovec*, int), Next, nullptr, 0)                          \
  X(pread, ssize_t (*)(int, void*, size_t, off_t), Next, nullptr, 0)                               \
  X(pwrite, ssize_t (*)(int, const void*, size_t, off_t), Next, nullptr, 0)                        \
  X(preadv, ssize_t (*)(int, const struct iovec*, int, off_t), Next, nullptr, 0)                   \
  X(pwritev, ssize_t (*)(int, const struct iovec*, int, off_t), Next, nullptr, 0)                  \
  X(preadv2, ssize_t (*)(int, const struct iovec*, int, off_t, int), Next, nullptr, 0)             \
  X(pwritev2, ssize_t (*)(int, const struct iovec*, int, off_t, int), Next, nullptr, 0)            \
  X(recv, ssize_t (*)(int, void*, size_t, int), Next, nullptr, 0)                                  \
  X(recvfrom, ssize_t (*)(int, void*, size_t, int, struct sockaddr*, socklen_t*), Next, nullptr,   \
    0)                                                                                             \
  X(recvmsg, ssize_t (*)(int, struct msghdr*, int), Next, nullptr, 0)                              \
  X(recvmmsg, int (*)(int, struct mmsghdr*, unsigned int, int, struct timespec*), Next, nullptr,   \
    0)                                                                                             \
  X(send, ssize_t (*)(int, const void*, size_t, int), Next, nullptr, 0)                            \
  X(sendto, ssize_t (*)(int, const void*, size_t, int, const struct sockaddr*, socklen_t), Next,   \
    nullptr, 0)                                                                                    \
  X(sendmsg, ssize_t (*)(int, const struct msghdr*, int), Next, nullptr, 0)                        \
  X(sendmmsg, int (*)(int, struct mmsghdr*, unsigned int, int), Next, nullptr, 0)                  \
  X(accept, int (*)(int, struct sockaddr*, socklen_t*), Next, nullptr, 0)                          \
  X(accept4, int (*)(int, struct sockaddr*, socklen_t*, int), Next, nullptr, 0)                    \
  X(connect, int (*)(int, const struct sockaddr*, socklen_t), Next, nullptr, 0)                    \
  X(sendfile, ssize_t (*)(int, int, off_t*, size_t), Next, nullptr, 0)                             \
  X(splice, ssize_t (*)(int, loff_t*, int, loff_t*, size_t, unsigned int), Next, nullptr, 0)       \
  X(tee, ssize_t (*)(int, int, size_t, unsigned int), Next, nullptr, 0)                            \
  X(vmsplice, ssize_t (*)(int, const struct iovec*, size_t, unsigned int), Next, nullptr, 0)       \
  X(poll, int (*)(struct pollfd*, nfds_t, int), Next, nullptr, 0)                                  \
  X(ppoll, int (*)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*), Next,         \
    nullptr, 0)                                                                                    \
  X(select, int (*)(int, fd_set*, fd_set*, fd_set*, struct timeval*), Next, nullptr, 0)            \
  X(pselect,                                                                                       \
    int (*)(int, fd_set*, fd_set*, fd_set*, const struct timespec*, const sigset_t*), Next,        \
    nullptr, 0)                                                                                    \
  X(epoll_wait, int (*)(int, struct epoll_event*, int, int), Next, nullptr, 0)                     \
  X(epoll_pwait, int (*)(int, struct epoll_event*, int, int, const sigset_t*), Next, nullptr, 0)   \
  X(epoll_pwait2,                                                                                  \
    int (*)(int, struct epoll_event*, int, const struct timespec*, const sigset_t*), Next,         \
    nullptr, 235)                                                                                  \
  X(fcntl, int (*)(int, int, ...), Next, nullptr, 0)                                               \
  X(ioctl, int (*)(int, unsigned long, ...), Next, nullptr, 0)                                     \
  X(close, int (*)(int), Next, nullptr, 0)                                                         \
  X(close_range, int (*)(unsigned int, unsigned int, int), Next, nullptr, 234)                     \
  X(closefrom, void (*)(int), Next, nullptr, 234)                                                  \
  X(fdopen, FILE* (*)(int, const char*), Next, nullptr, 0)                                         \
  X(vdprintf, int (*)(int, const char*, va_list), Next, nullptr, 0)                                \
  X(__vdprintf_chk, int (*)(int, int, const char*, va_list), Next, nullptr, 0)                     \
  X(sleep, unsigned int (*)(unsigned int), Next, nullptr, 0)                                       \
  X(usleep, int (*)(useconds_t), Next, nullptr, 0)                                                 \
  X(nanosleep, int (*)(const struct timespec*, struct timespec*), Next, nullptr, 0)                \
  X(clock_nanosleep, int (*)(clockid_t, int, const struct timespec*, struct timespec*), Next,      \
    nullptr, 0)                                                                                    \
  X(open, int (*)(const char*, int, ...), Next, nullptr, 0)                                        \
  X(open64, int (*)(const char*, int, ...), Next, nullptr, 0)                                      \
  X(openat, int (*)(int, const char*, int, ...), Next, nullptr, 0)                                 \
  X(openat64, int (*)(int, const char*, int, ...), Next, nullptr, 0)                               \
  X(creat, int (*)(const char*, mode_t), Next, nullptr, 0)                                         \
  X(creat64, int (*)(const char*, mode_t), Next, nullptr, 0)                                       \
  X(__open_2, int (*)(const char*, int), Next, nullptr, 0)                                         \
  X(__open64_2, int (*)(const char*, int), Next, nullptr, 0)                                       \
  X(__openat_2, int (*)(int, const char*, int), Next, nullptr, 0)                                  \
  X(__openat64_2, int (*)(int, const char*, int), Next, nullptr, 0)                                \
  X(posix_spawn_file_actions_adddup2, int (*)(posix_spawn_file_actions_t*, int, int), Next,        \
    nullptr, 0)                                                                                    \
  X(execve, int (*)(const char*, char* const*, char* const*), Next, nullptr, 0)                    \
  X(execv, int (*)(const char*, char* const*), Next, nullptr, 0)                                   \
  X(execvp, int (*)(const char*, char* const*), Next, nullptr, 0)                                  \
  X(execvpe, int (*)(const char*, char* const*, char* const*), Next, nullptr, 0)                   \
  X(fexecve, int (*)(int, char* const*, char* const*), Next, nullptr, 0)                           \
  X(execveat, int (*)(int, const char*, char* const*, char* const*, int), Next, nullptr, 234)      \
  /* blocking calls (shim/blocking_calls.cpp) */                                                   \
  X(wait, pid_t (*)(int*), Next, nullptr, 0)                                                       \
  X(waitpid, pid_t (*)(pid_t, int*, int), Next, nullptr, 0)                                        \
  X(waitid, int (*)(idtype_t, id_t, siginfo_t*, int), Next, nullptr, 0)                            \
  X(wait3, pid_t (*)(int*, int, struct rusage*), Next, nullptr, 0)                                 \
  X(wait4, pid_t (*)(pid_t, int*, int, struct rusage*), Next, nullptr, 0)                          \
  X(system, int (*)(const char*), Next, nullptr, 0)                                                \
  X(popen, FILE* (*)(const char*, const char*), Next, nullptr, 0)                                  \
  X(pclose, int (*)(FILE*), Next, nullptr, 0)                                                      \
  X(posix_spawn,                                                                                   \
    int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*,      \
            char* const[], char* const[]),                                                         \
    Next, nullptr, 0)                                                                              \
  X(posix_spawnp,                                                                                  \
    int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*,      \
            char* const[], char* const[]),                                                         \
    Next, nullptr, 0)                                                                              \
  X(fsync, int (*)(int), Next, nullptr, 0)                                                         \
  X(fdatasync, int (*)(int), Next, nullptr, 0)                                                     \
  X(syncfs, int (*)(int), Next, nullptr, 0)                                                        \
  X(sync, void (*)(void), Next, nullptr, 0)                                                        \
  X(sync_file_range, int (*)(int, off64_t, off64_t, unsigned int), Next, nullptr, 0)               \
  X(copy_file_range, ssize_t (*)(int, off64_t*, int, off64_t*, size_t, unsigned), Next, nullptr,   \
    0)                                                                                             \
  X(flock, int (*)(int, int), Next, nullptr, 0)                                                    \
  X(lockf, int (*)(int, int, off_t), Next, nullptr, 0)                                             \
  X(lockf64, int (*)(int, int, off64_t), Next, nullptr, 0)                                         \
  X(getaddrinfo,                                                                                   \
    int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**), Next, nullptr,   \
    0)                                                                                             \
  X(getnameinfo,                                                                                   \
    int (*)(const struct sockaddr*, socklen_t, char*, socklen_t, char*, socklen_t, int), Next,     \
    nullptr, 0)                                                                                    \
  X(gethostbyname, struct hostent* (*)(const char*), Next, nullptr, 0)                             \
  X(gethostbyname2, struct hostent* (*)(const char*, int), Next, nullptr, 0)                       \
  X(gethostbyname_r,                                                                               \
    int (*)(const char*, struct hostent*, char*, size_t, struct hostent**, int*), Next, nullptr,   \
    0)                                                                                             \
  X(gethostbyname2_r,                                                                              \
    int (*)(const char*, int, struct hostent*, char*, size_t, struct hostent**, int*), Next,       \
    nullptr, 0)                                                                                    \
  X(gethostbyaddr, struct hostent* (*)(const void*, socklen_t, int), Next, nullptr, 0)             \
  X(gethostbyaddr_r,                                                                               \
    int (*)(const void*, socklen_t, int, struct hostent*, char*, size_t, struct hostent**, int*),  \
    Next, nullptr, 0)                                                                              \
  X(msgrcv, ssize_t (*)(int, void*, size_t, long, int), Next, nullptr, 0)                          \
  X(msgsnd, int (*)(int, const void*, size_t, int), Next, nullptr, 0)                              \
  X(semop, int (*)(int, struct sembuf*, size_t), Next, nullptr, 0)                                 \
  X(semtimedop, int (*)(int, struct sembuf*, size_t, const struct timespec*), Next, nullptr, 0)    \
  X(mq_receive, ssize_t (*)(mqd_t, char*, size_t, unsigned*), Next, nullptr, 234)                  \
  X(mq_timedreceive, ssize_t (*)(mqd_t, char*, size_t, unsigned*, const struct timespec*), Next,   \
    nullptr, 234)                                                                                  \
  X(mq_send, int (*)(mqd_t, const char*, size_t, unsigned), Next, nullptr, 234)                    \
  X(mq_timedsend, int (*)(mqd_t, const char*, size_t, unsigned, const struct timespec*), Next,     \
    nullptr, 234)                                                                                  \
  /* glibc-private facts (LD_PRELOAD.md 1.2): ld.so's TLS entry points,                          \
     libthread_db's descriptors of struct pthread {bits, count, offset} */                         \
  X(_dl_allocate_tls, void* (*)(void*), Any, "GLIBC_PRIVATE", 0)                                   \
  X(_dl_deallocate_tls, void (*)(void*, bool), Any, "GLIBC_PRIVATE", 0)                            \
  X(_dl_get_tls_static_info, void (*)(size_t*, size_t*), Any, "GLIBC_PRIVATE", 0)                  \
  X(__call_tls_dtors, void (*)(void), Any, "GLIBC_PRIVATE", 0)                                     \
  X(__ctype_init, void (*)(void), Any, "GLIBC_PRIVATE", 0)                                         \
  X(__resp, intptr_t, AnyTls, "GLIBC_PRIVATE", 0)                                                  \
  X(_thread_db_sizeof_pthread, const uint32_t*, Any, "GLIBC_PRIVATE", 234)                         \
  X(_thread_db_pthread_list, const uint32_t*, Any, "GLIBC_PRIVATE", 234)                           \
  X(_thread_db_pthread_tid, const uint32_t*, Any, "GLIBC_PRIVATE", 234)                            \
  X(_thread_db_pthread_specific, const uint32_t*, Any, "GLIBC_PRIVATE", 234)                       \
  X(_thread_db_pthread_cancelhandling, const uint32_t*, Any, "GLIBC_PRIVATE", 234)                 \
  X(_thread_db_pthread_report_events, const uint32_t*, Any, "GLIBC_PRIVATE", 234)                  \
  X(_thread_db_link_map_l_tls_offset, const uint32_t*, Any, "GLIBC_PRIVATE", 234)                  \
  X(_thread_db_rtld_global__dl_stack_used, const uint32_t*, Any, "GLIBC_PRIVATE", 234)             \
  X(_thread_db_rtld_global__dl_stack_user, const uint32_t*, Any, "GLIBC_PRIVATE", 234)             \
  X(_thread_db_list_t_next, const uint32_t*, Any, "GLIBC_PRIVATE", 234)                            \
  X(_rtld_global, char*, Any, "GLIBC_PRIVATE", 0)                                                  \
  /* ld.so's table of entry points for libc (shim/dlopen.cpp: the dl_open                        \
     hook), found by value next to the public _dl_mcount */                                        \
  X(_rtld_global_ro, char*, Any, "GLIBC_PRIVATE", 0)                                               \
  X(_dl_mcount, void (*)(uintptr_t, uintptr_t), Any, nullptr, 0)                                   \
  /* libc's mutex functions, which ld.so's recursive locks call through                           \
     ___rtld_mutex_lock/_unlock (core/dlhook.cpp finds those by value) */                          \
  X(pthread_mutex_lock, int (*)(pthread_mutex_t*), Next, nullptr, 0)                               \
  X(pthread_mutex_unlock, int (*)(pthread_mutex_t*), Next, nullptr, 0)                             \
  /* public data and functions found wherever they are defined */                                  \
  /* the process allocator: goshim's jemalloc, unless the executable (or a  \
     library before libgoshim.so) defines its own; glibc allocates with it */ \
  X(calloc, void* (*)(size_t, size_t), Any, nullptr, 0)                                            \
  X(realloc, void* (*)(void*, size_t), Any, nullptr, 0)                                            \
  X(free, void (*)(void*), Any, nullptr, 0)                                                        \
  X(__rseq_offset, const ptrdiff_t*, Any, nullptr, 235)                                            \
  X(__rseq_size, const unsigned*, Any, nullptr, 235)                                               \
  /* 1 while the process has one thread; goshim clears it (core/runtime.cpp,                       \
     fork.cpp, cancelproto.cpp): goroutines share memory */                                        \
  X(__libc_single_threaded, char*, Any, nullptr, 232)                                              \
  /* glibc's own name for clock_gettime (syscalls/sys.cpp: the runtime's clock):                   \
     libc's function, never an interposer of the public name (goshim's own                         \
     shim/cpuclock.cpp, or a later preload) */                                                     \
  X(__clock_gettime, int (*)(clockid_t, struct timespec*), Any, "GLIBC_PRIVATE", 0)                \
  X(_Unwind_Find_FDE, const void* (*)(void*, void*), Any, nullptr, 0)

enum class Scope : uint8_t { Next, Any, AnyTls };

// Sym::name indexes the table.
enum class Sym : unsigned {
#define GOSHIM_REAL_ENUM(name, type, scope, version, since) name,
  GOSHIM_REAL_TABLE(GOSHIM_REAL_ENUM)
#undef GOSHIM_REAL_ENUM
  kCount
};

// One entry's description (the unit test walks them).
struct Entry {
  const char* name;
  Scope scope;
  const char* version;
  int since;
  void* cache;  // the real::name variable (one word)
};
extern const Entry table[];
constexpr unsigned kEntries = (unsigned)Sym::kCount;

// The cache: real::name. Filled by resolve(); nullptr (0) while unresolved
// or missing.
#define GOSHIM_REAL_DECL(name, type, scope, version, since) extern std::type_identity_t<type> name;
GOSHIM_REAL_TABLE(GOSHIM_REAL_DECL)
#undef GOSHIM_REAL_DECL

// Resolves every entry. Any thread, any time; idempotent, lock-free.
// Fatal if libc's pthread_create, pthread_join or pthread_exit is missing.
void resolve();
// True once resolve() has filled the table.
bool resolved();
// The entry's value, looking it up again if it is still missing (resolving
// the whole table first if that was never done). Any thread, any time.
uintptr_t lookup(Sym s);
// What the resolver finds for a symbol now, without the cache (the unit
// test compares it with dlsym/dlvsym).
uintptr_t find(const char* name, Scope scope, const char* version);

// real::lazy::name(): the cached value, resolved on first use. For code
// that may run before goshim's constructor or whose entry may appear later.
namespace lazy {
#define GOSHIM_REAL_LAZY(name, type, scope, version, since)                  \
  inline std::type_identity_t<type> name() {                                 \
    std::type_identity_t<type> v =                                           \
        __atomic_load_n(&::goshim::real::name, __ATOMIC_ACQUIRE);            \
    if (__builtin_expect(v == 0, 0)) v = (std::type_identity_t<type>)lookup(Sym::name); \
    return v;                                                                \
  }
GOSHIM_REAL_TABLE(GOSHIM_REAL_LAZY)
#undef GOSHIM_REAL_LAZY
}  // namespace lazy

// The calling thread's address of a TLS entry (scope AnyTls), or nullptr.
inline void* tls_address(intptr_t off, uintptr_t tp) { return off ? (void*)(tp + off) : nullptr; }

}  // namespace goshim::real
