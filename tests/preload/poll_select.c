/* poll, ppoll, select, pselect, epoll_wait and epoll_pwait: with and
 * without timeouts, mixed ready and unready fds, waits ended by another
 * thread's write, invalid fds, and an epoll fd watched by poll. Output is
 * compared with the native run. Also many threads polling at once (each
 * on its own pipe, woken in turn), with MAX_KERNEL_THREADS checked. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

/* A writer that writes once the main thread sleeps: in the wait that
   follows write_later (or, if that wait wrongly returned at once, in
   pthread_join: the result printed shows it). */
static int wfd;
static int main_tid;
static void *writer(void *arg) {
  wait_tid_asleep(main_tid, NULL);
  CHECK(write(wfd, "w", 1) == 1, "writer");
  return NULL;
}

static pthread_t write_later(int fd) {
  wfd = fd;
  main_tid = self_tid();
  pthread_t t;
  pthread_create(&t, NULL, writer, NULL);
  return t;
}

static void drain(int fd) {
  char buf[64];
  while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

static void test_poll(void) {
  int a[2], b[2], s[2];
  CHECK(pipe(a) == 0 && pipe(b) == 0, "pipe");
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0, "socketpair");
  CHECK(write(b[1], "x", 1) == 1, "write");
  struct pollfd p[5] = {{a[0], POLLIN, 0}, {b[0], POLLIN, 0}, {s[0], POLLOUT, 0},
                        {-1, POLLIN, 0},   {s[1], POLLIN, 0}};
  int r = poll(p, 5, 0);
  printf("poll t=0 mixed: %d  %#x %#x %#x %#x %#x\n", r, p[0].revents, p[1].revents, p[2].revents,
         p[3].revents, p[4].revents);
  r = poll(p, 5, 100);
  printf("poll t=100 mixed: %d  %#x %#x %#x\n", r, p[0].revents, p[1].revents, p[2].revents);
  struct pollfd q[2] = {{a[0], POLLIN, 0}, {s[1], POLLIN, 0}};
  r = poll(q, 2, 100);
  printf("poll t=100 unready: %d  %#x %#x\n", r, q[0].revents, q[1].revents);
  pthread_t t = write_later(a[1]);
  r = poll(q, 2, -1);
  pthread_join(t, NULL);
  printf("poll t=-1 woken by a write: %d  %#x %#x\n", r, q[0].revents, q[1].revents);
  char c;
  CHECK(read(a[0], &c, 1) == 1, "read");
  t = write_later(s[0]);
  r = poll(q, 2, 5000);
  pthread_join(t, NULL);
  printf("poll t=5000 woken by a socket write: %d  %#x %#x\n", r, q[0].revents, q[1].revents);
  drain(s[1]);
  struct timespec ts = {0, 50 * 1000 * 1000};
  r = ppoll(q, 2, &ts, NULL);
  printf("ppoll 50 ms unready: %d\n", r);
  t = write_later(a[1]);
  r = ppoll(q, 2, NULL, NULL);
  pthread_join(t, NULL);
  printf("ppoll NULL woken: %d  %#x\n", r, q[0].revents);
  CHECK(read(a[0], &c, 1) == 1, "read");
  /* Hang-up and invalid fds. */
  int h[2];
  CHECK(pipe(h) == 0, "pipe");
  close(h[1]);
  struct pollfd hp[2] = {{h[0], POLLIN, 0}, {999, POLLIN, 0}};
  r = poll(hp, 2, 1000);
  printf("poll hang-up and invalid fd: %d  %#x %#x\n", r, hp[0].revents, hp[1].revents);
  close(h[0]);
  /* A write end whose reader went away. */
  CHECK(pipe(h) == 0, "pipe");
  close(h[0]);
  struct pollfd ep = {h[1], POLLOUT, 0};
  r = poll(&ep, 1, 1000);
  printf("poll write end without reader: %d  %#x\n", r, ep.revents);
  close(h[1]);
  errno = 0;
  r = poll(NULL, 0, 30);
  printf("poll no fds 30 ms: %d %d\n", r, errno);
  close(a[0]);
  close(a[1]);
  close(b[0]);
  close(b[1]);
  close(s[0]);
  close(s[1]);
}

static void test_select(void) {
  int a[2], b[2];
  CHECK(pipe(a) == 0 && pipe(b) == 0, "pipe");
  CHECK(write(b[1], "x", 1) == 1, "write");
  fd_set r, w;
  FD_ZERO(&r);
  FD_ZERO(&w);
  FD_SET(a[0], &r);
  FD_SET(b[0], &r);
  FD_SET(a[1], &w);
  int n = (a[1] > b[0] ? a[1] : b[0]) + 1;
  struct timeval tv = {0, 0};
  int k = select(n, &r, &w, NULL, &tv);
  printf("select t=0: %d  a0 %d b0 %d a1w %d\n", k, FD_ISSET(a[0], &r), FD_ISSET(b[0], &r),
         FD_ISSET(a[1], &w));
  FD_ZERO(&r);
  FD_SET(a[0], &r);
  tv.tv_sec = 0;
  tv.tv_usec = 100 * 1000;
  k = select(n, &r, NULL, NULL, &tv);
  printf("select t=100ms unready: %d  a0 %d  tv left %ld.%06ld\n", k, FD_ISSET(a[0], &r),
         (long)tv.tv_sec, (long)tv.tv_usec);
  FD_ZERO(&r);
  FD_SET(a[0], &r);
  pthread_t t = write_later(a[1]);
  k = select(n, &r, NULL, NULL, NULL);
  pthread_join(t, NULL);
  printf("select NULL woken: %d  a0 %d\n", k, FD_ISSET(a[0], &r));
  char c;
  CHECK(read(a[0], &c, 1) == 1, "read");
  FD_ZERO(&r);
  FD_SET(a[0], &r);
  struct timespec ts = {0, 40 * 1000 * 1000};
  k = pselect(n, &r, NULL, NULL, &ts, NULL);
  printf("pselect 40 ms unready: %d  ts kept %ld\n", k, ts.tv_nsec);
  FD_ZERO(&r);
  FD_SET(a[0], &r);
  t = write_later(a[1]);
  k = pselect(n, &r, NULL, NULL, NULL, NULL);
  pthread_join(t, NULL);
  printf("pselect NULL woken: %d  a0 %d\n", k, FD_ISSET(a[0], &r));
  CHECK(read(a[0], &c, 1) == 1, "read");
  int bad = dup(a[0]);
  close(bad);
  FD_ZERO(&r);
  FD_SET(bad, &r);
  errno = 0;
  tv.tv_sec = 1;
  tv.tv_usec = 0;
  k = select(bad + 1, &r, NULL, NULL, &tv);
  printf("select on a closed fd: %d %s\n", k, errno == EBADF ? "EBADF" : strerror(errno));
  close(a[0]);
  close(a[1]);
  close(b[0]);
  close(b[1]);
}

static void test_epoll(void) {
  int a[2], b[2];
  CHECK(pipe(a) == 0 && pipe(b) == 0, "pipe");
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  ev.data.fd = a[0];
  epoll_ctl(ep, EPOLL_CTL_ADD, a[0], &ev);
  ev.data.fd = b[0];
  epoll_ctl(ep, EPOLL_CTL_ADD, b[0], &ev);
  struct epoll_event out[4];
  int n = epoll_wait(ep, out, 4, 0);
  printf("epoll_wait t=0 nothing ready: %d\n", n);
  n = epoll_wait(ep, out, 4, 100);
  printf("epoll_wait t=100 nothing ready: %d\n", n);
  CHECK(write(b[1], "x", 1) == 1, "write");
  n = epoll_wait(ep, out, 4, -1);
  printf("epoll_wait one ready: %d fd_is_b %d\n", n, n == 1 && out[0].data.fd == b[0]);
  char c;
  CHECK(read(b[0], &c, 1) == 1, "read");
  pthread_t t = write_later(a[1]);
  n = epoll_wait(ep, out, 4, -1);
  pthread_join(t, NULL);
  printf("epoll_wait woken by a write: %d fd_is_a %d\n", n, n == 1 && out[0].data.fd == a[0]);
  CHECK(read(a[0], &c, 1) == 1, "read");
  t = write_later(a[1]);
  n = epoll_pwait(ep, out, 4, 5000, NULL);
  pthread_join(t, NULL);
  printf("epoll_pwait woken: %d\n", n);
  CHECK(read(a[0], &c, 1) == 1, "read");
  /* The epoll fd itself is pollable. */
  struct pollfd p = {ep, POLLIN, 0};
  int r = poll(&p, 1, 50);
  printf("poll on an idle epoll fd: %d\n", r);
  t = write_later(b[1]);
  r = poll(&p, 1, -1);
  pthread_join(t, NULL);
  printf("poll on an epoll fd with an event: %d %#x\n", r, p.revents);
  errno = 0;
  n = epoll_wait(ep, out, 0, 10);
  printf("epoll_wait maxevents 0: %d %s\n", n, errno == EINVAL ? "EINVAL" : strerror(errno));
  errno = 0;
  n = epoll_wait(a[0], out, 4, 10);
  printf("epoll_wait on a pipe: %d %s\n", n, errno == EINVAL ? "EINVAL" : strerror(errno));
  close(ep);
  close(a[0]);
  close(a[1]);
  close(b[0]);
  close(b[1]);
}

/* Many threads in poll at once, each on its own pipe; released in a chain. */
#define NPOLLERS 2000
static int chain[NPOLLERS + 1][2];
static atomic_int polling;
static int poller_tid[NPOLLERS], poller_done[NPOLLERS];
static void *chain_poller(void *arg) {
  int i = (int)(long)arg;
  struct pollfd p = {chain[i][0], POLLIN, 0};
  atomic_fetch_add(&polling, 1);
  __atomic_store_n(&poller_tid[i], self_tid(), __ATOMIC_RELEASE);
  CHECK(poll(&p, 1, -1) == 1, "chain poll");
  __atomic_store_n(&poller_done[i], 1, __ATOMIC_RELEASE);
  char c;
  CHECK(read(chain[i][0], &c, 1) == 1, "chain read");
  CHECK(write(chain[i + 1][1], &c, 1) == 1, "chain write");
  return NULL;
}

static void test_many_pollers(void) {
  for (int i = 0; i <= NPOLLERS; i++) CHECK(pipe(chain[i]) == 0, "pipe %d", i);
  pthread_t *t = malloc(sizeof(pthread_t) * NPOLLERS);
  for (int i = 0; i < NPOLLERS; i++) pthread_create(&t[i], NULL, chain_poller, (void *)(long)i);
  for (int i = 0; i < NPOLLERS; i++) { /* every poller sleeps in poll */
    wait_flag(&poller_tid[i]);
    wait_tid_asleep(__atomic_load_n(&poller_tid[i], __ATOMIC_ACQUIRE), &poller_done[i]);
  }
  check_kernel_threads("pollers");
  CHECK(write(chain[0][1], "c", 1) == 1, "start");
  char c;
  struct pollfd p = {chain[NPOLLERS][0], POLLIN, 0};
  int r = poll(&p, 1, -1);
  CHECK(read(chain[NPOLLERS][0], &c, 1) == 1, "end");
  for (int i = 0; i < NPOLLERS; i++) pthread_join(t[i], NULL);
  printf("%d chained pollers: %d '%c'\n", NPOLLERS, r, c);
  for (int i = 0; i <= NPOLLERS; i++) {
    close(chain[i][0]);
    close(chain[i][1]);
  }
  free(t);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_poll();
  test_select();
  test_epoll();
  test_many_pollers();
  printf("done\n");
  return 0;
}
