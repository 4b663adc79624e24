/* The SIGPIPE-suppression idiom of libpq (pq_block_sigpipe and
 * pq_reset_sigpipe) and others: block SIGPIPE, write to a pipe or socket
 * whose reader is gone (EPIPE: the kernel makes SIGPIPE pending on the
 * writing thread), see it in sigpending, take it with sigwait / a
 * zero-timeout sigtimedwait, and it is no longer pending. libpq calls
 * sigwait, so a SIGPIPE that sigpending shows but no wait can take hangs
 * the program (here a wait of at most 10 s fails instead). From main and
 * from a second thread; write, send, writev, stdio (glibc's own write),
 * splice and syscall(SYS_write). The same for SIGXFSZ from a write past
 * RLIMIT_FSIZE (EFBIG). And one a thread leaves pending never reaches
 * another thread: threads that block it write to broken pipes and exit
 * without taking it, beside threads that leave it open (its handler, which
 * counts, runs 0 times; at the default action the process lives); one's
 * own, unblocked, runs its handler before pthread_sigmask returns. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

enum { WRITE, SEND, WRITEV, STDIO, SPLICE, RAW, NHOW };
static const char *hows[NHOW] = {"write", "send", "writev", "stdio", "splice", "syscall"};

/* Writes one byte to wr (whose reader is gone) the way `how` says. */
static long write_one(int wr, int how) {
  if (how == WRITEV) {
    struct iovec v = {"x", 1};
    return writev(wr, &v, 1);
  }
  if (how == SEND) return send(wr, "x", 1, 0);
  if (how == RAW) return syscall(SYS_write, wr, "x", 1);
  if (how == STDIO) {
    FILE *f = fdopen(dup(wr), "w");
    CHECK(f != NULL, "fdopen");
    setvbuf(f, NULL, _IONBF, 0);
    long r = fputc('x', f) == EOF ? -1 : 1;
    int e = errno;
    fclose(f);
    errno = e;
    return r;
  }
  if (how == SPLICE) {
    int src[2];
    CHECK_EQ(pipe(src), 0);
    CHECK_EQ(write(src[1], "x", 1), 1);
    long r = splice(src[0], NULL, wr, NULL, 1, 0);
    int e = errno;
    close(src[0]);
    close(src[1]);
    errno = e;
    return r;
  }
  return write(wr, "x", 1);
}

static void one(const char *who, int how, int look_first) {
  int fd[2];
  int sock = how == SEND || how == WRITEV;
  if (!sock) CHECK_EQ(pipe(fd), 0);
  else CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0);
  /* pipe: fd[0] reads; socketpair: either end */
  int wr = sock ? fd[0] : fd[1], rd = sock ? fd[1] : fd[0];
  CHECK_EQ(close(rd), 0);
  sigset_t s, pend;
  sigemptyset(&s);
  sigaddset(&s, SIGPIPE);
  CHECK_EQ(sigpending(&pend), 0);
  CHECK(!sigismember(&pend, SIGPIPE), "%s: SIGPIPE pending before the write", who);
  long r = write_one(wr, how);
  CHECK(r == -1 && errno == EPIPE, "%s %s: write to a closed reader: %ld errno %d", who,
        hows[how], r, errno);
  if (look_first) {
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(sigismember(&pend, SIGPIPE), "%s %s: SIGPIPE not pending after EPIPE", who, hows[how]);
  }
  struct timespec z = {0, 0};
  siginfo_t si;
  int sig;
  if (how == SEND) {
    /* As libpq: sigwait (bounded here: a sigtimedwait of 10 s). */
    struct timespec ten = {10, 0};
    sig = sigtimedwait(&s, &si, &ten);
  } else {
    sig = sigtimedwait(&s, &si, &z);
  }
  CHECK(sig == SIGPIPE, "%s %s: the pending SIGPIPE could not be taken (%d, errno %d)", who,
        hows[how], sig, errno);
  /* The kernel's own: SI_USER from this process. */
  CHECK(si.si_code == SI_USER && si.si_pid == getpid(), "%s %s: siginfo code %d pid %d", who,
        hows[how], si.si_code, (int)si.si_pid);
  CHECK_EQ(sigpending(&pend), 0);
  CHECK(!sigismember(&pend, SIGPIPE), "%s %s: SIGPIPE still pending after it was taken", who,
        hows[how]);
  CHECK_EQ(close(wr), 0);
}

static void block(int sig) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, sig);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
}

static void *run(void *arg) {
  const char *who = arg;
  block(SIGPIPE);
  for (int i = 0; i < 20; i++)
    for (int how = 0; how < NHOW; how++) one(who, how, i & 1);
  return NULL;
}

/* SIGXFSZ: a write at RLIMIT_FSIZE fails with EFBIG and raises it. */
static void *fsize(void *arg) {
  (void)arg;
  block(SIGXFSZ);
  char path[] = "/tmp/sigpipe_blocked.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp");
  unlink(path);
  struct rlimit old, lim;
  CHECK_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  lim = old;
  lim.rlim_cur = 4096;
  CHECK_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  static char buf[4096];
  CHECK_EQ(write(fd, buf, sizeof buf), (long)sizeof buf);
  for (int i = 0; i < 20; i++) {
    long r = i & 1 ? pwrite(fd, "x", 1, 4096) : write(fd, "x", 1);
    CHECK(r == -1 && errno == EFBIG, "write past RLIMIT_FSIZE: %ld errno %d", r, errno);
    sigset_t s, pend;
    sigemptyset(&s);
    sigaddset(&s, SIGXFSZ);
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(sigismember(&pend, SIGXFSZ), "SIGXFSZ not pending after EFBIG");
    struct timespec z = {0, 0};
    int sig = sigtimedwait(&s, NULL, &z);
    CHECK(sig == SIGXFSZ, "the pending SIGXFSZ could not be taken (%d, errno %d)", sig, errno);
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(!sigismember(&pend, SIGXFSZ), "SIGXFSZ still pending after it was taken");
  }
  CHECK_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  close(fd);
  return NULL;
}

/* Unblocking a SIGPIPE left pending by one's own write delivers it before
 * pthread_sigmask returns (POSIX), once: stdio's write (glibc's own, not
 * goshim's to see) and write. */
static volatile sig_atomic_t own;
static void on_own(int sig) {
  (void)sig;
  own++;
}

static void *unblock_delivers(void *arg) {
  (void)arg;
  for (int i = 0; i < 40; i++) {
    block(SIGPIPE);
    int fd[2];
    CHECK_EQ(pipe(fd), 0);
    CHECK_EQ(close(fd[0]), 0);
    int how = i % 2 ? STDIO : WRITE;
    long r = write_one(fd[1], how);
    CHECK(r == -1 && errno == EPIPE, "unblock %s: %ld errno %d", hows[how], r, errno);
    CHECK_EQ(close(fd[1]), 0);
    if (i % 4 == 1) sched_yield();
    int before = own;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
    CHECK(own == before + 1, "unblock %s: the handler ran %d times before pthread_sigmask returned",
          hows[how], own - before);
  }
  return NULL;
}

/* Threads that block SIGPIPE get EPIPE again and again and exit without
 * taking it, while threads that leave it open run beside them: none of
 * those gets it (natively it stays pending on the writer and goes with
 * it). With a handler that counts, then at the default action (a stray
 * one would end the process). */
static volatile sig_atomic_t stray;
static void on_pipe(int sig) {
  (void)sig;
  stray++;
}

static void *leave_pending(void *arg) {
  static const int pipe_hows[] = {WRITE, STDIO, SPLICE, RAW};
  block(SIGPIPE);
  for (int i = 0; i < 30; i++) {
    int how = pipe_hows[((long)arg + i) % 4];
    int fd[2];
    CHECK_EQ(pipe(fd), 0);
    CHECK_EQ(close(fd[0]), 0);
    long r = write_one(fd[1], how);
    CHECK(r == -1 && errno == EPIPE, "leave_pending %s: %ld errno %d", hows[how], r, errno);
    CHECK_EQ(close(fd[1]), 0);
    if (i % 8 == 0) sched_yield();
  }
  return NULL;
}

static void *open_worker(void *arg) {
  (void)arg;
  yield_a_while(300, 100000);
  return NULL;
}

static void strays(void) {
  enum { N = 16 };
  pthread_t ts[2 * N];
  for (int round = 0; round < 10; round++) {
    for (int i = 0; i < N; i++) {
      CHECK_EQ(pthread_create(&ts[2 * i], NULL, leave_pending, (void *)(long)i), 0);
      CHECK_EQ(pthread_create(&ts[2 * i + 1], NULL, open_worker, NULL), 0);
    }
    for (int i = 0; i < 2 * N; i++) CHECK_EQ(pthread_join(ts[i], NULL), 0);
  }
  sigset_t pend;
  CHECK_EQ(sigpending(&pend), 0);
  CHECK(!sigismember(&pend, SIGPIPE), "main: SIGPIPE pending after the writers exited");
}

int main(void) {
  sigset_t all;
  sigemptyset(&all);
  CHECK_EQ(pthread_sigmask(SIG_SETMASK, NULL, &all), 0);
  run("main");
  CHECK_EQ(pthread_sigmask(SIG_SETMASK, &all, NULL), 0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, run, "thread"), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  CHECK_EQ(pthread_create(&t, NULL, fsize, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);

  struct sigaction sa = {0};
  sa.sa_handler = on_own;
  CHECK_EQ(sigaction(SIGPIPE, &sa, NULL), 0);
  unblock_delivers(NULL);
  CHECK_EQ(pthread_create(&t, NULL, unblock_delivers, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  sa.sa_handler = on_pipe;
  CHECK_EQ(sigaction(SIGPIPE, &sa, NULL), 0);
  strays();
  CHECK(stray == 0, "a SIGPIPE raised for another thread's write reached a thread that leaves it "
        "open %d times", (int)stray);
  sa.sa_handler = SIG_DFL;
  CHECK_EQ(sigaction(SIGPIPE, &sa, NULL), 0);
  strays();  /* a stray one ends the process (SIGPIPE's default action) */
  printf("SIGPIPE after EPIPE: pending, taken, gone (write, send, writev, stdio, splice, "
         "syscall; main and a thread); SIGXFSZ after EFBIG the same; none outlives its thread\n");
  return 0;
}
