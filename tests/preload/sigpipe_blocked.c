/* The SIGPIPE-suppression idiom of libpq (pq_block_sigpipe and
 * pq_reset_sigpipe) and others: block SIGPIPE, write to a pipe or socket
 * whose reader is gone (EPIPE: the kernel makes SIGPIPE pending on the
 * writing thread), see it in sigpending, take it with sigwait / a
 * zero-timeout sigtimedwait, and it is no longer pending. libpq calls
 * sigwait, so a SIGPIPE that sigpending shows but no wait can take hangs
 * the program (here a wait of at most 10 s fails instead). From main and
 * from a second thread; write, send and writev. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static void one(const char *who, int how) {
  int fd[2];
  if (how == 0) CHECK_EQ(pipe(fd), 0);
  else CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0);
  /* pipe: fd[0] reads; socketpair: either end */
  int wr = how == 0 ? fd[1] : fd[0], rd = how == 0 ? fd[0] : fd[1];
  CHECK_EQ(close(rd), 0);
  sigset_t s, pend;
  sigemptyset(&s);
  sigaddset(&s, SIGPIPE);
  CHECK_EQ(sigpending(&pend), 0);
  CHECK(!sigismember(&pend, SIGPIPE), "%s: SIGPIPE pending before the write", who);
  long r;
  if (how == 2) {
    struct iovec v = {"x", 1};
    r = writev(wr, &v, 1);
  } else if (how == 1) {
    r = send(wr, "x", 1, 0);
  } else {
    r = write(wr, "x", 1);
  }
  CHECK(r == -1 && errno == EPIPE, "%s: write to a closed reader: %ld errno %d", who, r, errno);
  CHECK_EQ(sigpending(&pend), 0);
  CHECK(sigismember(&pend, SIGPIPE), "%s %d: SIGPIPE not pending after EPIPE", who, how);
  struct timespec z = {0, 0};
  if (how == 1) {
    int sig = 0;
    /* As libpq: sigwait (bounded here: a sigtimedwait of 10 s). */
    struct timespec ten = {10, 0};
    sig = sigtimedwait(&s, NULL, &ten);
    CHECK(sig == SIGPIPE, "%s %d: the pending SIGPIPE could not be taken (%d, errno %d)", who,
          how, sig, errno);
  } else {
    int sig = sigtimedwait(&s, NULL, &z);
    CHECK(sig == SIGPIPE, "%s %d: zero-timeout sigtimedwait gave %d (errno %d)", who, how, sig,
          errno);
  }
  CHECK_EQ(sigpending(&pend), 0);
  CHECK(!sigismember(&pend, SIGPIPE), "%s %d: SIGPIPE still pending after it was taken", who,
        how);
  CHECK_EQ(close(wr), 0);
}

static void *run(void *arg) {
  const char *who = arg;
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGPIPE);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  for (int i = 0; i < 50; i++)
    for (int how = 0; how < 3; how++) one(who, how);
  return NULL;
}

int main(void) {
  run("main");
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, run, "thread"), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("SIGPIPE after EPIPE: pending, taken, gone (write, send, writev; main and a thread)\n");
  return 0;
}
