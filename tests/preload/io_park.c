/* Every blocking call on every pollable kind of fd waits without holding a
 * kernel thread: for each call and kind below, K threads block in it at
 * once (under goshim the process must then have at most MAX_KERNEL_THREADS
 * kernel threads, far fewer than its threads), then they are released and
 * each call returns what it returns natively (output compared).
 *
 *   eventfd, timerfd, signalfd, tty (pty) and FIFO reads; epoll_wait and
 *   epoll_pwait on the program's own epoll fd; poll, ppoll, select, pselect;
 *   read, readv, recv, recvfrom, recvmsg, recvmmsg; accept, accept4;
 *   connect to a listener whose backlog is full; write, writev, send,
 *   sendto, sendmsg on full sockets and pipes; sendmmsg on a full datagram
 *   socket; sendfile into a full socket; splice from an empty pipe and into
 *   a full one.
 *
 * Each thread publishes its kernel thread id just before its call, and the
 * main thread waits for every one of them to sleep in the kernel (/proc
 * state S) before it counts them blocked; then it leaves them a short
 * window (a call that wrongly returns early shows in the count; no correct
 * outcome depends on it). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define K 8

static void msleep(int ms) { usleep((useconds_t)ms * 1000); }

struct cat {
  const char *name;
  void (*setup)(int i);
  long (*call)(int i);  /* the blocking call; its result (normalized) */
  void (*release)(void);
  int (*pump)(void);    /* called until every call returned (optional) */
  void (*teardown)(int i);
};

static const struct cat *cur;
static atomic_int ndone;
static long res[K];
static int err[K];
static int tids[K], dones[K]; /* set just before / after the call */

static void *blocker(void *arg) {
  int i = (int)(long)arg;
  errno = 0;
  __atomic_store_n(&tids[i], self_tid(), __ATOMIC_RELEASE);
  res[i] = cur->call(i);
  err[i] = res[i] < 0 ? errno : 0;
  __atomic_store_n(&dones[i], 1, __ATOMIC_RELEASE);
  atomic_fetch_add(&ndone, 1);
  return NULL;
}

static void run(const struct cat *c) {
  cur = c;
  atomic_store(&ndone, 0);
  memset(tids, 0, sizeof tids);
  memset(dones, 0, sizeof dones);
  for (int i = 0; i < K; i++) c->setup(i);
  pthread_t t[K];
  for (int i = 0; i < K; i++)
    CHECK(pthread_create(&t[i], NULL, blocker, (void *)(long)i) == 0, "create");
  for (int i = 0; i < K; i++) {
    wait_flag(&tids[i]);
    wait_tid_asleep(__atomic_load_n(&tids[i], __ATOMIC_ACQUIRE), &dones[i]);
  }
  msleep(20); /* the window */
  int blocked = K - atomic_load(&ndone);
  check_kernel_threads(c->name);
  c->release();
  if (c->pump)
    while (atomic_load(&ndone) < K)
      if (!c->pump()) msleep(1);
  for (int i = 0; i < K; i++) pthread_join(t[i], NULL);
  int same = 1;
  for (int i = 1; i < K; i++) same &= res[i] == res[0] && err[i] == err[0];
  printf("%-40s %d of %d blocked; ", c->name, blocked, K);
  if (same) {
    printf("each returned %ld %s\n", res[0], err[0] ? strerror(err[0]) : "");
  } else {
    for (int i = 0; i < K; i++) printf(" [%d] %ld %s", i, res[i], err[i] ? strerror(err[i]) : "");
    printf("\n");
  }
  for (int i = 0; i < K; i++) c->teardown(i);
}

/* ---- fds of each kind -------------------------------------------------------------------- */

static int fd1[K], fd2[K], fd3[K];

static void close_all(int i) {
  close(fd1[i]);
  if (fd2[i] >= 0) close(fd2[i]);
  if (fd3[i] >= 0) close(fd3[i]);
  fd2[i] = fd3[i] = -1;
}

static void set_nb(int fd, int on) {
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* Fills fd's buffer (a socket or a pipe's write end) until it would block. */
static long fill(int fd) {
  static char junk[4096];
  long total = 0;
  set_nb(fd, 1);
  for (;;) {
    ssize_t w = write(fd, junk, sizeof junk);
    if (w < 0) break;
    total += w;
  }
  CHECK(errno == EAGAIN, "fill: %s", strerror(errno));
  set_nb(fd, 0);
  return total;
}

/* Reads what is there without waiting; returns the bytes read. */
static long drain(int fd) {
  static char buf[65536];
  long total = 0;
  set_nb(fd, 1);
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r <= 0) break;
    total += r;
  }
  set_nb(fd, 0);
  return total;
}

/* eventfd */
static void ev_setup(int i) { fd1[i] = eventfd(0, 0); }
static long ev_call(int i) {
  uint64_t v;
  return read(fd1[i], &v, sizeof v) == sizeof v ? (long)v : -1;
}
static void ev_release(void) {
  for (int i = 0; i < K; i++) {
    uint64_t v = 5;
    CHECK(write(fd1[i], &v, sizeof v) == sizeof v, "eventfd write");
  }
}

/* timerfd, disarmed until released */
static void tf_setup(int i) { fd1[i] = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC); }
static long tf_call(int i) {
  uint64_t v;
  return read(fd1[i], &v, sizeof v) == sizeof v ? (long)v : -1;
}
static void tf_release(void) {
  struct itimerspec its = {{0, 0}, {0, 1000 * 1000}};
  for (int i = 0; i < K; i++) CHECK(timerfd_settime(fd1[i], 0, &its, NULL) == 0, "settime");
}

/* signalfd: the signal is blocked in every thread (main blocks it first) */
static int sigfd;
static int rtsig;
static void sf_setup(int i) { fd1[i] = -1; }
static long sf_call(int i) {
  struct signalfd_siginfo si;
  ssize_t r = read(sigfd, &si, sizeof si);
  return r == sizeof si ? (long)(si.ssi_signo == (uint32_t)rtsig) : r;
}
static void sf_release(void) {
  union sigval v = {0};
  for (int i = 0; i < K; i++) CHECK(sigqueue(getpid(), rtsig, v) == 0, "sigqueue");
}
static void none(int i) {}

/* a pty: the slave side is a tty */
static int have_pty = 1;
static void tty_setup(int i) {
  fd1[i] = posix_openpt(O_RDWR | O_NOCTTY);
  if (fd1[i] < 0 || grantpt(fd1[i]) != 0 || unlockpt(fd1[i]) != 0) {
    have_pty = 0;
    return;
  }
  fd2[i] = open(ptsname(fd1[i]), O_RDWR | O_NOCTTY);
  CHECK(fd2[i] >= 0 && isatty(fd2[i]), "pty slave");
}
static long tty_call(int i) {
  char buf[16];
  return read(fd2[i], buf, sizeof buf);
}
static void tty_release(void) {
  for (int i = 0; i < K; i++) CHECK(write(fd1[i], "tty\n", 4) == 4, "pty write");
}

/* a FIFO opened by path (a file goshim did not create) */
static char fifo_dir[64];
static void fifo_setup(int i) {
  char path[96];
  snprintf(path, sizeof path, "%s/f%d", fifo_dir, i);
  CHECK(mkfifo(path, 0600) == 0, "mkfifo");
  fd1[i] = open(path, O_RDWR);
  CHECK(fd1[i] >= 0, "open fifo");
  unlink(path);
}
static long fifo_call(int i) {
  char buf[8];
  return read(fd1[i], buf, sizeof buf);
}
static void fifo_release(void) {
  for (int i = 0; i < K; i++) CHECK(write(fd1[i], "fifo", 4) == 4, "fifo write");
}

/* pipes and socketpairs */
static void pipe_setup(int i) {
  int p[2];
  CHECK(pipe(p) == 0, "pipe");
  fd1[i] = p[0];
  fd2[i] = p[1];
}
static void sp_setup(int i) {
  int s[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0, "socketpair");
  fd1[i] = s[0];
  fd2[i] = s[1];
}
static void write_each(void) {
  for (int i = 0; i < K; i++) CHECK(write(fd2[i], "abc", 3) == 3, "write");
}

/* the program's own epoll instances */
static void ep_setup(int i) {
  pipe_setup(i);
  fd3[i] = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 77};
  CHECK(epoll_ctl(fd3[i], EPOLL_CTL_ADD, fd1[i], &ev) == 0, "epoll_ctl");
}
static long ep_call(int i) {
  struct epoll_event ev[2];
  sigset_t none;
  sigemptyset(&none);
  int n = i % 2 ? epoll_pwait(fd3[i], ev, 2, -1, &none) : epoll_wait(fd3[i], ev, 2, 60000);
  return n == 1 && ev[0].data.u32 == 77 ? 1 : -1;
}

/* poll, ppoll, select, pselect */
static long pollish_call(int i) {
  int fd = fd1[i];
  switch (i % 4) {
    case 0: {
      struct pollfd p[2] = {{fd, POLLIN, 0}, {fd2[i], 0, 0}};
      return poll(p, 2, -1) == 1 && p[0].revents == POLLIN ? 1 : -1;
    }
    case 1: {
      struct pollfd p = {fd, POLLIN, 0};
      struct timespec ts = {60, 0};
      return ppoll(&p, 1, &ts, NULL) == 1 && p.revents == POLLIN ? 1 : -1;
    }
    case 2: {
      fd_set r;
      FD_ZERO(&r);
      FD_SET(fd, &r);
      return select(fd + 1, &r, NULL, NULL, NULL) == 1 && FD_ISSET(fd, &r) ? 1 : -1;
    }
    default: {
      fd_set r;
      FD_ZERO(&r);
      FD_SET(fd, &r);
      struct timespec ts = {60, 0};
      return pselect(fd + 1, &r, NULL, NULL, &ts, NULL) == 1 && FD_ISSET(fd, &r) ? 1 : -1;
    }
  }
}

/* reads of pipes and sockets */
static void rd_setup(int i) {
  if (i % 6 < 2)
    pipe_setup(i);
  else
    sp_setup(i);
}
static long rd_call(int i) {
  char buf[16];
  struct iovec iov = {buf, sizeof buf};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  switch (i % 6) {
    case 0: return read(fd1[i], buf, sizeof buf);
    case 1: return readv(fd1[i], &iov, 1);
    case 2: return recv(fd1[i], buf, sizeof buf, 0);
    case 3: return recvfrom(fd1[i], buf, sizeof buf, 0, (struct sockaddr *)&ss, &sl);
    case 4: return recvmsg(fd1[i], &m, 0);
    default: return read(fd1[i], buf, sizeof buf);
  }
}

/* recvmmsg on UDP sockets */
static struct sockaddr_in udp_addr[K];
static void udp_setup(int i) {
  fd1[i] = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(fd1[i], (struct sockaddr *)&sa, sizeof sa) == 0, "bind");
  socklen_t sl = sizeof udp_addr[i];
  getsockname(fd1[i], (struct sockaddr *)&udp_addr[i], &sl);
}
static long udp_call(int i) {
  char b[2][32];
  struct iovec iov[2] = {{b[0], 32}, {b[1], 32}};
  struct mmsghdr mm[2];
  memset(mm, 0, sizeof mm);
  for (int k = 0; k < 2; k++) {
    mm[k].msg_hdr.msg_iov = &iov[k];
    mm[k].msg_hdr.msg_iovlen = 1;
  }
  int n = recvmmsg(fd1[i], mm, 2, MSG_WAITFORONE, NULL);
  return n == 1 ? (long)mm[0].msg_len : n < 0 ? -1 : 100 + n;
}
static void udp_release(void) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  for (int i = 0; i < K; i++)
    CHECK(sendto(s, "datagram", 8, 0, (struct sockaddr *)&udp_addr[i], sizeof udp_addr[i]) == 8,
          "sendto");
  close(s);
}

/* accept and accept4 */
static struct sockaddr_in lis_addr[K];
static int listener(struct sockaddr_in *sa, int backlog) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(l, (struct sockaddr *)sa, sizeof *sa) == 0, "bind");
  CHECK(listen(l, backlog) == 0, "listen");
  socklen_t sl = sizeof *sa;
  getsockname(l, (struct sockaddr *)sa, &sl);
  return l;
}
static void acc_setup(int i) { fd1[i] = listener(&lis_addr[i], 4); }
static long acc_call(int i) {
  int c = i % 2 ? accept4(fd1[i], NULL, NULL, SOCK_CLOEXEC) : accept(fd1[i], NULL, NULL);
  if (c < 0) return -1;
  close(c);
  return 0;
}
static void acc_release(void) {
  for (int i = 0; i < K; i++) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(c, (struct sockaddr *)&lis_addr[i], sizeof lis_addr[i]) == 0, "connect");
    close(c);
  }
}

/* connect while the listener's accept queue is full: the SYN is dropped
 * and the connect waits for its retransmission */
#define FILLERS (K + 3)
static int cl_fd;
static struct sockaddr_in cl_addr;
static int cl_fill[FILLERS];
static void conn_prepare(void) {
  cl_fd = listener(&cl_addr, FILLERS - 1);
  for (int k = 0; k < FILLERS; k++) {
    cl_fill[k] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int r = connect(cl_fill[k], (struct sockaddr *)&cl_addr, sizeof cl_addr);
    CHECK(r == 0 || errno == EINPROGRESS, "filler connect: %s", strerror(errno));
    struct pollfd p = {cl_fill[k], POLLOUT, 0};
    CHECK(poll(&p, 1, 10000) == 1, "filler connected");
  }
}
static void conn_setup(int i) {
  if (i == 0) conn_prepare();
  fd1[i] = socket(AF_INET, SOCK_STREAM, 0);
}
static long conn_call(int i) {
  return connect(fd1[i], (struct sockaddr *)&cl_addr, sizeof cl_addr);
}
static void conn_release(void) {
  for (int k = 0; k < FILLERS + K; k++) {
    int c = accept(cl_fd, NULL, NULL);
    CHECK(c >= 0, "accept: %s", strerror(errno));
    close(c);
  }
}
static void conn_teardown(int i) {
  close(fd1[i]);
  if (i == 0) {
    for (int k = 0; k < FILLERS; k++) close(cl_fill[k]);
    close(cl_fd);
  }
}

/* writes into full sockets and pipes */
static char wbuf[1000];
static void wr_setup(int i) {
  rd_setup(i);
  /* the reading end is fd1, the writing end fd2 */
  fill(fd2[i]);
}
static long wr_call(int i) {
  struct iovec iov[2] = {{wbuf, 500}, {wbuf + 500, 500}};
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
  switch (i % 6) {
    case 0: return write(fd2[i], wbuf, sizeof wbuf);
    case 1: return writev(fd2[i], iov, 2);
    case 2: return send(fd2[i], wbuf, sizeof wbuf, 0);
    case 3: return sendto(fd2[i], wbuf, sizeof wbuf, 0, NULL, 0);
    case 4: return sendmsg(fd2[i], &m, 0);
    default: return writev(fd2[i], iov, 2);
  }
}
static int drain_each(void) {
  long got = 0;
  for (int i = 0; i < K; i++) got += drain(fd1[i]);
  return got > 0;
}
static void drain_release(void) { drain_each(); }

/* sendmmsg on a full datagram socket */
static void dg_setup(int i) {
  int s[2];
  CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, s) == 0, "socketpair");
  fd1[i] = s[1];
  fd2[i] = s[0];
  set_nb(fd2[i], 1);
  while (send(fd2[i], "dgram", 5, 0) == 5) {
  }
  CHECK(errno == EAGAIN, "dgram fill: %s", strerror(errno));
  set_nb(fd2[i], 0);
}
static long dg_call(int i) {
  struct iovec iov[2] = {{"one", 3}, {"two", 3}};
  struct mmsghdr mm[2];
  memset(mm, 0, sizeof mm);
  for (int k = 0; k < 2; k++) {
    mm[k].msg_hdr.msg_iov = &iov[k];
    mm[k].msg_hdr.msg_iovlen = 1;
  }
  return sendmmsg(fd2[i], mm, 2, 0);
}
static int dg_pump(void) {
  char b[64];
  int any = 0;
  for (int i = 0; i < K; i++)
    while (recv(fd1[i], b, sizeof b, MSG_DONTWAIT) > 0) any = 1;
  return any;
}
static void dg_release(void) { dg_pump(); }

/* sendfile from a regular file into a full socket */
static int file_fd;
static off_t file_off[K];
#define FILE_BYTES (256 * 1024)
static void sfile_setup(int i) {
  sp_setup(i);
  fill(fd2[i]);
  file_off[i] = 0;
}
static long sfile_call(int i) { return sendfile(fd2[i], file_fd, &file_off[i], FILE_BYTES); }

/* splice from an empty pipe into a socket */
static int spl_peer[K];
static void spl_in_setup(int i) {
  pipe_setup(i);  /* fd1 read end, fd2 write end */
  int s[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0, "socketpair");
  fd3[i] = s[0];
  spl_peer[i] = s[1];
}
static long spl_in_call(int i) { return splice(fd1[i], NULL, fd3[i], NULL, 100, 0); }
static void spl_in_release(void) {
  static char data[100];
  for (int i = 0; i < K; i++) CHECK(write(fd2[i], data, 100) == 100, "pipe write");
}
static void spl_teardown(int i) {
  close_all(i);
  close(spl_peer[i]);
}

/* splice from a socket into a full pipe */
static void spl_out_setup(int i) {
  pipe_setup(i);
  fill(fd2[i]);
  int s[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0, "socketpair");
  fd3[i] = s[0];
  spl_peer[i] = s[1];
  static char data[100];
  CHECK(write(spl_peer[i], data, 100) == 100, "socket write");
}
static long spl_out_call(int i) { return splice(fd3[i], NULL, fd2[i], NULL, 100, 0); }

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  /* The signal signalfd reads: blocked before any thread exists. */
  rtsig = SIGRTMIN + 3;
  sigset_t ss;
  sigemptyset(&ss);
  sigaddset(&ss, rtsig);
  CHECK(pthread_sigmask(SIG_BLOCK, &ss, NULL) == 0, "sigmask");
  sigfd = signalfd(-1, &ss, SFD_CLOEXEC);
  CHECK(sigfd >= 0, "signalfd");
  for (int i = 0; i < K; i++) fd2[i] = fd3[i] = -1;
  snprintf(fifo_dir, sizeof fifo_dir, "/tmp/goshim-io-park-%d", (int)getpid());
  CHECK(mkdir(fifo_dir, 0700) == 0, "mkdir");
  char path[96];
  snprintf(path, sizeof path, "%s/file", fifo_dir);
  file_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK(file_fd >= 0, "file");
  unlink(path);
  static char zeros[FILE_BYTES];
  CHECK(write(file_fd, zeros, sizeof zeros) == sizeof zeros, "file write");

  const struct cat cats[] = {
      {"read signalfd", sf_setup, sf_call, sf_release, NULL, none},
      {"read eventfd", ev_setup, ev_call, ev_release, NULL, close_all},
      {"read timerfd", tf_setup, tf_call, tf_release, NULL, close_all},
      {"read FIFO", fifo_setup, fifo_call, fifo_release, NULL, close_all},
      {"epoll_wait/epoll_pwait on own epoll fd", ep_setup, ep_call, write_each, NULL, close_all},
      {"poll/ppoll/select/pselect", pipe_setup, pollish_call, write_each, NULL, close_all},
      {"read/readv/recv/recvfrom/recvmsg", rd_setup, rd_call, write_each, NULL, close_all},
      {"recvmmsg UDP", udp_setup, udp_call, udp_release, NULL, close_all},
      {"accept/accept4", acc_setup, acc_call, acc_release, NULL, close_all},
      {"connect, listen backlog full", conn_setup, conn_call, conn_release, NULL, conn_teardown},
      {"write/writev/send/sendto/sendmsg full", wr_setup, wr_call, drain_release, drain_each,
       close_all},
      {"sendmmsg full datagram socket", dg_setup, dg_call, dg_release, dg_pump, close_all},
      {"sendfile into a full socket", sfile_setup, sfile_call, drain_release, drain_each,
       close_all},
      {"splice from an empty pipe", spl_in_setup, spl_in_call, spl_in_release, NULL,
       spl_teardown},
      {"splice into a full pipe", spl_out_setup, spl_out_call, drain_release, drain_each,
       spl_teardown},
  };
  for (unsigned k = 0; k < sizeof cats / sizeof cats[0]; k++) run(&cats[k]);

  /* Last: ttys (a container may have no pty). */
  tty_setup(0);
  if (have_pty) {
    close(fd1[0]);
    close(fd2[0]);
    fd2[0] = -1;
    const struct cat tty = {"read tty (pty slave)", tty_setup, tty_call, tty_release, NULL,
                            close_all};
    run(&tty);
  }
  close(file_fd);
  rmdir(fifo_dir);
  printf("done\n");
  if (!have_pty) {
    fprintf(stderr, "SKIP: no pty here: the tty category was not tested\n");
    return 77;
  }
  return 0;
}
