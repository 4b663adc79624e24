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
 * own, unblocked, runs its handler before pthread_sigmask returns; one
 * raised inside a handler whose sa_mask blocks it runs on that thread once
 * the handler returns; and a kill() of the process, which looks the same,
 * stays the process's (a thread's exit or sigpending leaves it for main). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
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

/* A pipe whose reader is closed, written to `how`: EPIPE. */
static void epipe_write(const char *who, int how) {
  int fd[2];
  CHECK_EQ(pipe(fd), 0);
  CHECK_EQ(close(fd[0]), 0);
  long r = write_one(fd[1], how);
  CHECK(r == -1 && errno == EPIPE, "%s %s: %ld errno %d", who, hows[how], r, errno);
  CHECK_EQ(close(fd[1]), 0);
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
    int how = i % 2 ? STDIO : WRITE;
    epipe_write("unblock", how);
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
    epipe_write("leave_pending", pipe_hows[((long)arg + i) % 4]);
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

/* A thread that leaves SIGPIPE open writes to a broken pipe inside a
 * SIGUSR1 handler whose sa_mask blocks SIGPIPE: its SIGPIPE handler runs
 * on it once the SIGUSR1 handler returns, before raise() does; not on
 * another thread that blocks SIGPIPE and ran on the same kernel thread. */
static volatile sig_atomic_t masked_hits;
static pthread_t masked_on;
static int broken_wr;
static pthread_mutex_t hm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hc = PTHREAD_COND_INITIALIZER;
static int b_done;
static void on_pipe_masked(int sig) {
  (void)sig;
  masked_hits++;
  masked_on = pthread_self();
}
static void on_usr1_write(int sig) {
  (void)sig;
  if (write(broken_wr, "x", 1) != -1 || errno != EPIPE) _exit(3);
}
static void *blocker(void *arg) {
  (void)arg;
  block(SIGPIPE);
  yield_a_while(100, 50000);
  pthread_mutex_lock(&hm);
  while (!b_done) pthread_cond_wait(&hc, &hm);
  pthread_mutex_unlock(&hm);
  sigset_t p;
  CHECK_EQ(sigpending(&p), 0);
  CHECK(!sigismember(&p, SIGPIPE), "another thread's SIGPIPE is pending on a thread that blocks it");
  return NULL;
}
static void *writer_in_handler(void *arg) {
  (void)arg;
  yield_a_while(100, 50000);
  int before = masked_hits;
  CHECK_EQ(raise(SIGUSR1), 0);
  CHECK(masked_hits == before + 1, "SIGPIPE of a write in a handler ran %d times",
        masked_hits - before);
  CHECK(pthread_equal(masked_on, pthread_self()), "SIGPIPE's handler ran on another thread");
  pthread_mutex_lock(&hm);
  b_done = 1;
  pthread_cond_broadcast(&hc);
  pthread_mutex_unlock(&hm);
  return NULL;
}
static void handler_mask(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_pipe_masked;
  CHECK_EQ(sigaction(SIGPIPE, &sa, NULL), 0);
  sa.sa_handler = on_usr1_write;
  sigaddset(&sa.sa_mask, SIGPIPE);
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  for (int i = 0; i < 20; i++) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(close(p[0]), 0);
    broken_wr = p[1];
    b_done = 0;
    pthread_t a, b;
    CHECK_EQ(pthread_create(&a, NULL, blocker, NULL), 0);
    CHECK_EQ(pthread_create(&b, NULL, writer_in_handler, NULL), 0);
    CHECK_EQ(pthread_join(b, NULL), 0);
    CHECK_EQ(pthread_join(a, NULL), 0);
    CHECK_EQ(close(p[1]), 0);
  }
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(sigaction(SIGPIPE, &sa, NULL), 0);
}

/* kill(getpid(), SIGPIPE) while every thread blocks it looks like the
 * kernel's own SIGPIPE for a write, but is the process's: a thread's
 * sigpending shows it, a thread's exit does not take it away, and main's
 * sigtimedwait takes it. */
static void *look_and_exit(void *arg) {
  sigset_t p;
  CHECK_EQ(sigpending(&p), 0);
  CHECK(sigismember(&p, SIGPIPE), "a thread's sigpending: the process's SIGPIPE is not pending");
  return arg;
}
static void process_sigpipe(void) {
  block(SIGPIPE);
  for (int i = 0; i < 10; i++) {
    CHECK_EQ(kill(getpid(), SIGPIPE), 0);
    for (int k = 0; k < 3; k++) {
      pthread_t t;
      CHECK_EQ(pthread_create(&t, NULL, look_and_exit, NULL), 0);
      CHECK_EQ(pthread_join(t, NULL), 0);
    }
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    struct timespec ten = {10, 0};
    siginfo_t si;
    int sig = sigtimedwait(&s, &si, &ten);
    CHECK(sig == SIGPIPE, "main could not take the process's SIGPIPE (%d, errno %d)", sig, errno);
    CHECK(si.si_code == SI_USER && si.si_pid == getpid(), "process SIGPIPE: code %d pid %d",
          si.si_code, (int)si.si_pid);
  }
}

/* A fork child, SIGPIPE blocked since before the fork: a stdio write to a
 * broken pipe leaves it pending; unblocking runs its handler once. */
static void fork_child_unblock(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_own;
  CHECK_EQ(sigaction(SIGPIPE, &sa, NULL), 0);
  block(SIGPIPE);
  for (int i = 0; i < 5; i++) {
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
      int fd[2];
      if (pipe(fd) != 0 || close(fd[0]) != 0) _exit(2);
      errno = 0;
      if (write_one(fd[1], STDIO) != -1 || errno != EPIPE) _exit(3);
      int before = own;
      sigset_t s;
      sigemptyset(&s);
      sigaddset(&s, SIGPIPE);
      if (pthread_sigmask(SIG_UNBLOCK, &s, NULL) != 0) _exit(4);
      _exit(own == before + 1 ? 0 : 5);
    }
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child: status 0x%x", st);
  }
  sa.sa_handler = SIG_DFL;
  CHECK_EQ(sigaction(SIGPIPE, &sa, NULL), 0);
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
  handler_mask();
  fork_child_unblock();
  process_sigpipe();
  printf("SIGPIPE after EPIPE: pending, taken, gone (write, send, writev, stdio, splice, "
         "syscall; main and a thread); SIGXFSZ after EFBIG the same; none outlives its thread\n");
  return 0;
}
