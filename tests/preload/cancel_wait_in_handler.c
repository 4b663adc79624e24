/* A thread with deferred cancellation enabled runs a signal handler that
 * blocks in poll, ppoll, select, pselect, epoll_wait or read (of an empty
 * pipe, no timeout). Another thread, once it sleeps there, cancels it: each
 * of these calls is a cancellation point, so the thread is unwound out of
 * the handler (its cleanup handler runs, the call never returns, the join
 * reports PTHREAD_CANCELED). A thread not canceled within 20 s is let go
 * (a byte written to the pipe) and the case fails instead of hanging. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

enum { OP_POLL, OP_PPOLL, OP_SELECT, OP_PSELECT, OP_EPOLL, OP_READ, NOPS };
static const char *names[NOPS] = {"poll", "ppoll", "select", "pselect", "epoll_wait", "read"};

static int p[2];
static int ep;
static volatile int op, tid, noted, returned;

static void on_usr1(int s) {
  (void)s;
  struct pollfd pfd = {.fd = p[0], .events = POLLIN};
  fd_set r;
  FD_ZERO(&r);
  FD_SET(p[0], &r);
  struct epoll_event ev;
  char c;
  __atomic_store_n(&tid, self_tid(), __ATOMIC_RELEASE);
  switch (op) {
    case OP_POLL:
      poll(&pfd, 1, -1);
      break;
    case OP_PPOLL:
      ppoll(&pfd, 1, NULL, NULL);
      break;
    case OP_SELECT:
      select(p[0] + 1, &r, NULL, NULL, NULL);
      break;
    case OP_PSELECT:
      pselect(p[0] + 1, &r, NULL, NULL, NULL, NULL);
      break;
    case OP_EPOLL:
      epoll_wait(ep, &ev, 1, -1);
      break;
    case OP_READ:
      read(p[0], &c, 1);
      break;
  }
  returned = 1;
}

static void note(void *a) {
  (void)a;
  noted = 1;
}

static void *victim(void *a) {
  (void)a;
  pthread_cleanup_push(note, NULL);
  pthread_kill(pthread_self(), SIGUSR1);
  pthread_testcancel();
  pthread_cleanup_pop(0);
  return NULL;
}

static void run(int which) {
  op = which;
  tid = noted = returned = 0;
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, victim, NULL), 0);
  wait_flag(&tid);
  wait_tid_asleep(tid, &returned);
  CHECK(!returned, "%s: the call returned before the cancellation", names[which]);
  CHECK_EQ(pthread_cancel(t), 0);
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += 20;
  void *r;
  int e = pthread_timedjoin_np(t, &r, &dl);
  if (e == ETIMEDOUT) {
    CHECK_EQ(write(p[1], "x", 1), 1);
    CHECK_EQ(pthread_join(t, &r), 0);
    char c;
    CHECK_EQ(read(p[0], &c, 1), 1);
  } else {
    CHECK_EQ(e, 0);
  }
  CHECK(e == 0, "%s: the thread was not canceled in the handler's call (returned %d)",
        names[which], returned);
  CHECK(r == PTHREAD_CANCELED, "%s: the thread returned %p", names[which], r);
  CHECK(noted, "%s: no cleanup handler ran", names[which]);
  CHECK(!returned, "%s: the call returned in the handler", names[which]);
  printf("%s in a handler: canceled\n", names[which]);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(pipe(p), 0);
  ep = epoll_create1(0);
  CHECK(ep >= 0, "epoll_create1: %d", errno);
  struct epoll_event ev = {.events = EPOLLIN};
  CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev), 0);
  int reps = env_int("REPS", 1);
  for (int i = 0; i < reps; i++)
    for (int w = 0; w < NOPS; w++) run(w);
  return 0;
}
