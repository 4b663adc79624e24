// libc calls that may block and cannot be polled: each runs inside a
// blocking-call section (syscalls/blocking.hpp), so the goroutine's P goes
// to another M while the kernel thread waits. Calls that usually block for
// long (waiting for children, signals, locks, the resolver, message
// queues) hand the P off at once when other work is runnable (Long);
// calls that are usually quick (fsync, copy_file_range, posix_spawn) keep
// sysmon's 20 µs path (Short). Non-blocking variants (WNOHANG, LOCK_NB,
// IPC_NOWAIT, ...) go straight to libc.
//
// The regular-file read/write/open/close family lives with the fd table
// (shim/file_io.cpp, shim/socket_io.cpp).
#include <fcntl.h>
#include <mqueue.h>
#include <netdb.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fdtable.hpp"
#include "core/real.hpp"
#include "shim/shim.hpp"
#include "syscalls/blocking.hpp"

using namespace goshim;

// Defines NAME(ARGS) calling the real NAME inside a blocking section of
// kind KIND when the caller is a goroutine. BLOCKS is an expression over
// the arguments telling whether this call may block at all.
#define GOSHIM_BLOCKING(RET, NAME, KIND, BLOCKS, PARAMS, ARGS) \
  GOSHIM_BLOCKING_PRE(RET, NAME, KIND, BLOCKS, PARAMS, ARGS, (void)0)
// The same, running PRE (a statement) before the call.
#define GOSHIM_BLOCKING_PRE(RET, NAME, KIND, BLOCKS, PARAMS, ARGS, PRE)         \
  GOSHIM_EXPORT RET NAME PARAMS {                                                \
    auto real_fn = real::lazy::NAME();                                           \
    PRE;                                                                         \
    if ((BLOCKS) && shim::user_g())                                              \
      return blocking_cancellable(BlockKind::KIND, #NAME,                       \
                                  [&] { return real_fn ARGS; });                 \
    return real_fn ARGS;                                                         \
  }

// ---- children ----------------------------------------------------------------
GOSHIM_BLOCKING(pid_t, wait, Long, true, (int* status), (status))
GOSHIM_BLOCKING(pid_t, waitpid, Long, !(options & WNOHANG), (pid_t pid, int* status, int options),
                (pid, status, options))
GOSHIM_BLOCKING(int, waitid, Long, !(options & WNOHANG),
                (idtype_t idtype, id_t id, siginfo_t* info, int options),
                (idtype, id, info, options))
GOSHIM_BLOCKING(pid_t, wait3, Long, !(options & WNOHANG),
                (int* status, int options, struct rusage* ru), (status, options, ru))
GOSHIM_BLOCKING(pid_t, wait4, Long, !(options & WNOHANG),
                (pid_t pid, int* status, int options, struct rusage* ru),
                (pid, status, options, ru))
// The child of system, popen and posix_spawn shares this process's open
// file descriptions and runs another program: the inheritable files goshim
// keeps O_NONBLOCK underneath go back to the kernel first (blocking, as the
// program sees them), for good (core/fdtable.hpp, fd_prepare_spawn).
GOSHIM_BLOCKING_PRE(int, system, Long, command != nullptr, (const char* command), (command),
                    if (command) fd_prepare_spawn())
GOSHIM_BLOCKING_PRE(FILE*, popen, Short, true, (const char* command, const char* type),
                    (command, type), fd_prepare_spawn())
GOSHIM_BLOCKING(int, pclose, Long, true, (FILE * stream), (stream))
GOSHIM_BLOCKING_PRE(int, posix_spawn, Short, true,
                    (pid_t * pid, const char* path, const posix_spawn_file_actions_t* fa,
                     const posix_spawnattr_t* attr, char* const argv[], char* const envp[]),
                    (pid, path, fa, attr, argv, envp), fd_prepare_spawn())
GOSHIM_BLOCKING_PRE(int, posix_spawnp, Short, true,
                    (pid_t * pid, const char* file, const posix_spawn_file_actions_t* fa,
                     const posix_spawnattr_t* attr, char* const argv[], char* const envp[]),
                    (pid, file, fa, attr, argv, envp), fd_prepare_spawn())

// ---- files: durability and locks ------------------------------------------------
GOSHIM_BLOCKING(int, fsync, Short, true, (int fd), (fd))
GOSHIM_BLOCKING(int, fdatasync, Short, true, (int fd), (fd))
GOSHIM_BLOCKING(int, syncfs, Short, true, (int fd), (fd))
GOSHIM_BLOCKING(void, sync, Long, true, (void), ())
GOSHIM_BLOCKING(int, sync_file_range, Short, true,
                (int fd, off64_t off, off64_t n, unsigned int flags), (fd, off, n, flags))
GOSHIM_BLOCKING(ssize_t, copy_file_range, Short, true,
                (int in, off64_t* inoff, int out, off64_t* outoff, size_t n, unsigned flags),
                (in, inoff, out, outoff, n, flags))
GOSHIM_BLOCKING(int, flock, Long, !(op & LOCK_NB), (int fd, int op), (fd, op))
GOSHIM_BLOCKING(int, lockf, Long, cmd == F_LOCK, (int fd, int cmd, off_t len), (fd, cmd, len))
GOSHIM_BLOCKING(int, lockf64, Long, cmd == F_LOCK, (int fd, int cmd, off64_t len),
                (fd, cmd, len))

// ---- name resolution (files, DNS over UDP/TCP inside libc) -------------------------
GOSHIM_BLOCKING(int, getaddrinfo, Long, true,
                (const char* node, const char* service, const struct addrinfo* hints,
                 struct addrinfo** res),
                (node, service, hints, res))
GOSHIM_BLOCKING(int, getnameinfo, Long, true,
                (const struct sockaddr* sa, socklen_t salen, char* host, socklen_t hostlen,
                 char* serv, socklen_t servlen, int flags),
                (sa, salen, host, hostlen, serv, servlen, flags))
GOSHIM_BLOCKING(struct hostent*, gethostbyname, Long, true, (const char* name), (name))
GOSHIM_BLOCKING(struct hostent*, gethostbyname2, Long, true, (const char* name, int af),
                (name, af))
GOSHIM_BLOCKING(int, gethostbyname_r, Long, true,
                (const char* name, struct hostent* ret, char* buf, size_t buflen,
                 struct hostent** result, int* h_errnop),
                (name, ret, buf, buflen, result, h_errnop))
GOSHIM_BLOCKING(int, gethostbyname2_r, Long, true,
                (const char* name, int af, struct hostent* ret, char* buf, size_t buflen,
                 struct hostent** result, int* h_errnop),
                (name, af, ret, buf, buflen, result, h_errnop))
GOSHIM_BLOCKING(struct hostent*, gethostbyaddr, Long, true,
                (const void* addr, socklen_t len, int type), (addr, len, type))
GOSHIM_BLOCKING(int, gethostbyaddr_r, Long, true,
                (const void* addr, socklen_t len, int type, struct hostent* ret, char* buf,
                 size_t buflen, struct hostent** result, int* h_errnop),
                (addr, len, type, ret, buf, buflen, result, h_errnop))

// ---- System V and POSIX IPC ----------------------------------------------------------
GOSHIM_BLOCKING(ssize_t, msgrcv, Long, !(flg & IPC_NOWAIT),
                (int id, void* msgp, size_t sz, long typ, int flg), (id, msgp, sz, typ, flg))
GOSHIM_BLOCKING(int, msgsnd, Short, !(flg & IPC_NOWAIT),
                (int id, const void* msgp, size_t sz, int flg), (id, msgp, sz, flg))
GOSHIM_BLOCKING(int, semop, Long, true, (int id, struct sembuf* sops, size_t n), (id, sops, n))
GOSHIM_BLOCKING(int, semtimedop, Long, true,
                (int id, struct sembuf* sops, size_t n, const struct timespec* ts),
                (id, sops, n, ts))
GOSHIM_BLOCKING(ssize_t, mq_receive, Long, true,
                (mqd_t q, char* msg, size_t len, unsigned* prio), (q, msg, len, prio))
GOSHIM_BLOCKING(ssize_t, mq_timedreceive, Long, true,
                (mqd_t q, char* msg, size_t len, unsigned* prio, const struct timespec* ts),
                (q, msg, len, prio, ts))
GOSHIM_BLOCKING(int, mq_send, Short, true, (mqd_t q, const char* msg, size_t len, unsigned prio),
                (q, msg, len, prio))
GOSHIM_BLOCKING(int, mq_timedsend, Short, true,
                (mqd_t q, const char* msg, size_t len, unsigned prio, const struct timespec* ts),
                (q, msg, len, prio, ts))
