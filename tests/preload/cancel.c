/* pthread_cancel of threads blocked in read, in the other blocking fd
 * calls that are cancellation points (accept, recv, write to a full pipe,
 * poll, select, epoll_wait), in waitpid and in open of a FIFO (calls the
 * kernel blocks in: glibc cancels them asynchronously, or at entry when
 * the cancellation was already pending), in pthread_cond_wait, in sleep and in
 * pthread_join; asynchronous cancellation of a loop; cleanup
 * handlers run in reverse order; PTHREAD_CANCELED from join; cancellation
 * disabled is deferred until enabled. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>
#include "common.h"

static char trail[64];
static int ntrail;
static pthread_mutex_t trail_lock = PTHREAD_MUTEX_INITIALIZER;
static void note(void *c) {
  pthread_mutex_lock(&trail_lock);
  trail[ntrail++] = (char)(intptr_t)c;
  pthread_mutex_unlock(&trail_lock);
}

static int rp[2];
static volatile int started;

static void *in_read(void *arg) {
  pthread_cleanup_push(note, (void *)'r');
  char c;
  started = self_tid(); /* just before the call */
  read(rp[0], &c, 1);
  pthread_cleanup_pop(0);
  return NULL;
}

/* The other fd waits: each marks the trail with its own letter. */
static int lfd, sv[2], fullp[2], epfd;
static void *in_fdwait(void *arg) {
  char what = (char)(intptr_t)arg;
  pthread_cleanup_push(note, arg);
  char buf[64];
  started = self_tid(); /* just before the call */
  switch (what) {
    case 'A': accept(lfd, NULL, NULL); break;
    case 'R': recv(sv[0], buf, sizeof buf, 0); break;
    case 'W': {
      static char big[1 << 16];
      for (;;) write(fullp[1], big, sizeof big);
    }
    case 'P': {
      struct pollfd p = {sv[0], POLLIN, 0};
      poll(&p, 1, -1);
      break;
    }
    case 'S': {
      fd_set r;
      FD_ZERO(&r);
      FD_SET(sv[0], &r);
      select(sv[0] + 1, &r, NULL, NULL, NULL);
      break;
    }
    case 'E': {
      struct epoll_event ev;
      epoll_wait(epfd, &ev, 1, -1);
      break;
    }
  }
  pthread_cleanup_pop(0);
  return NULL;
}

/* Calls that block in the kernel. */
static pid_t child;
static char fifo[64];
static int lockfd; /* locked by the child: F_SETLKW waits for it */
static volatile int may_enter;
static void *in_kernel_call(void *arg) {
  char what = (char)(intptr_t)arg;
  if (what == 'x') pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
  pthread_cleanup_push(note, arg);
  started = self_tid(); /* just before the call */
  int st;
  switch (what) {
    case 'w': waitpid(child, &st, 0); break;
    case 'o': open(fifo, O_RDONLY); break;
    case 'l': {
      struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
      fcntl(lockfd, F_SETLKW, &fl);
      break;
    }
    case 'x': /* the cancellation is pending when waitpid starts */
      while (!may_enter) sched_yield();
      pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
      waitpid(child, &st, 0);
      break;
  }
  pthread_cleanup_pop(0);
  return NULL;
}

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static void unlock_m(void *arg) {
  note((void *)'c');
  pthread_mutex_unlock(&m); /* the mutex is held again when handlers run */
}
static void *in_cond(void *arg) {
  pthread_mutex_lock(&m);
  pthread_cleanup_push(unlock_m, NULL);
  started = self_tid(); /* just before the call */
  for (;;) pthread_cond_wait(&cv, &m);
  pthread_cleanup_pop(1);
  return NULL;
}

static void *in_sleep(void *arg) {
  pthread_cleanup_push(note, (void *)'s');
  started = self_tid(); /* just before the call */
  sleep(60);
  pthread_cleanup_pop(0);
  return NULL;
}

static pthread_t forever;
static void *never_ends(void *arg) {
  for (;;) pause();
  return arg;
}
static void *in_join(void *arg) {
  pthread_cleanup_push(note, (void *)'j');
  started = self_tid(); /* just before the call */
  pthread_join(forever, NULL);
  pthread_cleanup_pop(0);
  return NULL;
}

static volatile unsigned long spins;
static void *async_loop(void *arg) {
  pthread_cleanup_push(note, (void *)'a');
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
  started = -1; /* it never blocks: cancel at once */
  for (;;) spins++;
  pthread_cleanup_pop(0);
  return NULL;
}

static void *nested(void *arg) {
  pthread_cleanup_push(note, (void *)'1');
  pthread_cleanup_push(note, (void *)'2');
  pthread_cleanup_push(note, (void *)'3');
  started = self_tid(); /* just before the call */
  for (;;) pthread_testcancel();
  pthread_cleanup_pop(0);
  pthread_cleanup_pop(0);
  pthread_cleanup_pop(0);
  return NULL;
}

static volatile int may_enable;
static void *deferred(void *arg) {
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
  started = self_tid(); /* just before the call */
  while (!may_enable) sched_yield();
  pthread_cleanup_push(note, (void *)'d');
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
  pthread_testcancel();
  pthread_cleanup_pop(0);
  return (void *)1;
}

static void cancel_and_check_arg(void *(*fn)(void *), char mark, void *arg) {
  started = 0;
  ntrail = 0;
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, fn, arg), 0);
  while (!started) sched_yield();
  if (started > 0) wait_tid_asleep(started, NULL); /* canceled while blocked in its call */
  CHECK_EQ(pthread_cancel(t), 0);
  void *r;
  CHECK_EQ(pthread_join(t, &r), 0);
  CHECK(r == PTHREAD_CANCELED, "%c: join returned %p", mark, r);
  CHECK(ntrail >= 1 && trail[ntrail - 1] == mark, "%c: cleanup trail %.*s", mark, ntrail, trail);
}

static void cancel_and_check(void *(*fn)(void *), char mark) { cancel_and_check_arg(fn, mark, NULL); }

int main(void) {
  CHECK_EQ(pipe(rp), 0);
  cancel_and_check(in_read, 'r');
  lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK_EQ(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
  CHECK_EQ(listen(lfd, 4), 0);
  CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  CHECK_EQ(pipe(fullp), 0);
  epfd = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  CHECK_EQ(epoll_ctl(epfd, EPOLL_CTL_ADD, sv[0], &ev), 0);
  const char *fdwaits = "ARWPSE";
  for (const char *w = fdwaits; *w; w++) cancel_and_check_arg(in_fdwait, *w, (void *)(intptr_t)*w);
  /* The canceled waits left nothing behind: the fds still work. */
  CHECK_EQ(write(sv[1], "x", 1), 1);
  char x;
  CHECK_EQ(read(sv[0], &x, 1), 1);
  char lockpath[64];
  snprintf(lockpath, sizeof lockpath, "/tmp/cancel-lock-%d", (int)getpid());
  lockfd = open(lockpath, O_CREAT | O_RDWR | O_TRUNC, 0600);
  CHECK(lockfd >= 0, "open %s", lockpath);
  unlink(lockpath);
  int lp[2];
  CHECK_EQ(pipe(lp), 0);
  child = fork();
  CHECK(child >= 0, "fork");
  if (child == 0) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(lockfd, F_SETLK, &fl) != 0 || write(lp[1], "k", 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  CHECK_EQ(read(lp[0], &x, 1), 1); /* the child holds the lock */
  snprintf(fifo, sizeof fifo, "/tmp/cancel-fifo-%d", (int)getpid());
  CHECK_EQ(mkfifo(fifo, 0600), 0);
  cancel_and_check_arg(in_kernel_call, 'w', (void *)(intptr_t)'w');
  cancel_and_check_arg(in_kernel_call, 'o', (void *)(intptr_t)'o');
  cancel_and_check_arg(in_kernel_call, 'l', (void *)(intptr_t)'l');
  {
    started = 0;
    ntrail = 0;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, in_kernel_call, (void *)(intptr_t)'x'), 0);
    while (!started) sched_yield();
    CHECK_EQ(pthread_cancel(t), 0);
    may_enter = 1;
    void *r;
    CHECK_EQ(pthread_join(t, &r), 0);
    CHECK(r == PTHREAD_CANCELED && ntrail == 1 && trail[0] == 'x', "pending at waitpid: %p %.*s", r,
          ntrail, trail);
  }
  unlink(fifo);
  kill(child, SIGKILL);
  int st;
  CHECK_EQ(waitpid(child, &st, 0), child);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child status %x", st);
  /* The canceled calls left the scheduler whole: threads still run. */
  cancel_and_check(in_cond, 'c');
  CHECK_EQ(pthread_mutex_trylock(&m), 0); /* the handler released it */
  pthread_mutex_unlock(&m);
  cancel_and_check(in_sleep, 's');
  CHECK_EQ(pthread_create(&forever, NULL, never_ends, NULL), 0);
  cancel_and_check(in_join, 'j');
  cancel_and_check(async_loop, 'a');
  started = 0;
  ntrail = 0;
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, nested, NULL), 0);
  while (!started) sched_yield();
  CHECK_EQ(pthread_cancel(t), 0);
  void *r;
  CHECK_EQ(pthread_join(t, &r), 0);
  CHECK(r == PTHREAD_CANCELED && ntrail == 3 && memcmp(trail, "321", 3) == 0, "nested trail %.*s",
        ntrail, trail);
  /* disabled: the cancel waits until enabled */
  started = 0;
  ntrail = 0;
  CHECK_EQ(pthread_create(&t, NULL, deferred, NULL), 0);
  while (!started) sched_yield();
  CHECK_EQ(pthread_cancel(t), 0);
  for (int i = 0; i < 100; i++) sched_yield();
  CHECK_EQ(ntrail, 0);
  may_enable = 1;
  CHECK_EQ(pthread_join(t, &r), 0);
  CHECK(r == PTHREAD_CANCELED && ntrail == 1 && trail[0] == 'd', "deferred: %p %.*s", r, ntrail, trail);
  CHECK_EQ(pthread_cancel(forever), 0);
  CHECK_EQ(pthread_join(forever, &r), 0);
  CHECK(r == PTHREAD_CANCELED, "pause: %p", r);
  printf("cancellation in read, accept, recv, write, poll, select, epoll_wait, waitpid, open, fcntl(F_SETLKW), "
         "cond_wait, sleep, "
         "join, pause, async loop; handlers in order\n");
  return 0;
}
