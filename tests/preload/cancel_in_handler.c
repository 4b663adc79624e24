/* A thread whose deferred cancellation is pending runs a signal handler
 * (raise) that calls close, read or connect: the call is a cancellation
 * point and unwinds the thread out of the handler at entry, before it does
 * anything. What it was called on is left exactly as it was:
 *   close:   the pipe's read end stays open and keeps working (a blocking
 *            read of it waits for data);
 *   read:    the pipe's read end, closed afterwards, is closed (a write to
 *            the pipe gets EPIPE);
 *   connect: the socket is not connected, and once connected by another
 *            thread a blocking read of it waits and is canceled there.
 * Each descriptor first served a blocking call of another thread. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common.h"

enum { OP_CLOSE, OP_READ, OP_CONNECT, NOPS };
static const char *names[NOPS] = {"close", "read", "connect"};

static int cp[2];   /* close: a pipe */
static int rp[2];   /* read: a pipe, empty */
static int lsn;     /* connect: a unix listener with a full backlog */
static int sock;    /* connect: the socket connected in the handler */
static struct sockaddr_un sun;
static int gate[2]; /* lets the canceled thread on */
static volatile int op, ready, noted, returned;

static void on_usr1(int s) {
  (void)s;
  char c;
  switch (op) {
    case OP_CLOSE:
      close(cp[0]);
      break;
    case OP_READ:
      read(rp[0], &c, 1);
      break;
    case OP_CONNECT:
      connect(sock, (struct sockaddr *)&sun, sizeof sun);
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
  char c;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
  __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
  CHECK_EQ(read(gate[0], &c, 1), 1);
  pthread_cleanup_push(note, NULL);
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
  raise(SIGUSR1);
  pthread_testcancel();
  pthread_cleanup_pop(0);
  return NULL;
}

static void cancel_in_handler(int which) {
  op = which;
  ready = noted = returned = 0;
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, victim, NULL), 0);
  wait_flag(&ready);
  CHECK_EQ(pthread_cancel(t), 0);
  CHECK_EQ(write(gate[1], "g", 1), 1);
  void *r;
  CHECK_EQ(pthread_join(t, &r), 0);
  CHECK(r == PTHREAD_CANCELED, "%s: the thread returned %p", names[which], r);
  CHECK(noted, "%s: no cleanup handler ran", names[which]);
  CHECK(!returned, "%s: the call returned in the handler", names[which]);
}

/* A thread that reads one byte from fd (blocking) and reports it. */
static volatile int reader_tid, reader_done;
static int reader_fd;
static long reader_got;
static char reader_byte;

static void *reader(void *a) {
  (void)a;
  reader_tid = self_tid();
  reader_got = read(reader_fd, &reader_byte, 1);
  reader_done = 1;
  return NULL;
}

/* A blocking read on a socket that another thread cancels. */
static void *read_forever(void *a) {
  char c;
  reader_tid = self_tid();
  read((int)(intptr_t)a, &c, 1);
  return NULL;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(pipe(gate), 0);
  pthread_t t;
  char c;

  /* close */
  CHECK_EQ(pipe(cp), 0);
  reader_fd = cp[0];
  reader_tid = reader_done = 0;
  CHECK_EQ(pthread_create(&t, NULL, reader, NULL), 0);
  wait_flag(&reader_tid);
  wait_tid_asleep(reader_tid, &reader_done);
  CHECK_EQ(write(cp[1], "a", 1), 1);
  CHECK_EQ(pthread_join(t, NULL), 0);
  CHECK_EQ(reader_got, 1);
  cancel_in_handler(OP_CLOSE);
  CHECK(fcntl(cp[0], F_GETFD) >= 0, "close: the descriptor was closed");
  reader_tid = reader_done = 0;
  CHECK_EQ(pthread_create(&t, NULL, reader, NULL), 0);
  wait_flag(&reader_tid);
  wait_tid_asleep(reader_tid, &reader_done); /* it waits for data */
  CHECK_EQ(write(cp[1], "b", 1), 1);
  CHECK_EQ(pthread_join(t, NULL), 0);
  CHECK(reader_got == 1 && reader_byte == 'b', "close: the read got %ld (errno %d)", reader_got,
        errno);
  printf("close: canceled at entry, the descriptor open and blocking\n");

  /* read */
  CHECK_EQ(pipe(rp), 0);
  reader_fd = rp[0];
  reader_tid = reader_done = 0;
  CHECK_EQ(pthread_create(&t, NULL, reader, NULL), 0);
  wait_flag(&reader_tid);
  wait_tid_asleep(reader_tid, &reader_done);
  CHECK_EQ(write(rp[1], "a", 1), 1);
  CHECK_EQ(pthread_join(t, NULL), 0);
  cancel_in_handler(OP_READ);
  CHECK_EQ(close(rp[0]), 0);
  errno = 0;
  CHECK_EQ(write(rp[1], "x", 1), -1);
  CHECK_EQ(errno, EPIPE);
  printf("read: canceled at entry, the pipe closed with its read end\n");

  /* connect */
  memset(&sun, 0, sizeof sun);
  sun.sun_family = AF_UNIX;
  snprintf(sun.sun_path, sizeof sun.sun_path, "/tmp/cancel-in-handler-%d", (int)getpid());
  unlink(sun.sun_path);
  lsn = socket(AF_UNIX, SOCK_STREAM, 0);
  CHECK(bind(lsn, (struct sockaddr *)&sun, sizeof sun) == 0, "bind: %d", errno);
  CHECK_EQ(listen(lsn, 0), 0);
  int fill[4], nfill = 0;
  for (; nfill < 4; nfill++) { /* fill the backlog (non-blocking connects) */
    fill[nfill] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (connect(fill[nfill], (struct sockaddr *)&sun, sizeof sun) != 0) {
      CHECK_EQ(errno, EAGAIN);
      close(fill[nfill]);
      break;
    }
  }
  CHECK(nfill > 0 && nfill < 4, "the backlog took %d connections", nfill);
  sock = socket(AF_UNIX, SOCK_STREAM, 0);
  errno = 0;
  CHECK_EQ(recv(sock, &c, 1, 0), -1); /* a blocking call on it: not connected */
  CHECK(errno == ENOTCONN || errno == EINVAL, "recv: errno %d", errno);
  cancel_in_handler(OP_CONNECT);
  for (int i = 0; i < nfill; i++) close(fill[i]);
  int a, lfl = fcntl(lsn, F_GETFL);
  CHECK_EQ(fcntl(lsn, F_SETFL, lfl | O_NONBLOCK), 0);
  while ((a = accept(lsn, NULL, NULL)) >= 0) close(a);
  CHECK_EQ(errno, EAGAIN);
  CHECK_EQ(fcntl(lsn, F_SETFL, lfl), 0);
  struct sockaddr_un peer;
  socklen_t pl = sizeof peer;
  CHECK_EQ(getpeername(sock, (struct sockaddr *)&peer, &pl), -1);
  CHECK_EQ(errno, ENOTCONN);
  CHECK_EQ(connect(sock, (struct sockaddr *)&sun, sizeof sun), 0);
  int srv = accept(lsn, NULL, NULL);
  CHECK(srv >= 0, "accept: %d", errno);
  reader_tid = 0;
  CHECK_EQ(pthread_create(&t, NULL, read_forever, (void *)(intptr_t)sock), 0);
  wait_flag(&reader_tid);
  wait_tid_asleep(reader_tid, NULL);
  CHECK_EQ(pthread_cancel(t), 0);
  void *r;
  CHECK_EQ(pthread_join(t, &r), 0);
  CHECK(r == PTHREAD_CANCELED, "connect: the reader returned %p", r);
  printf("connect: canceled at entry, the socket unconnected; a read of it later is canceled\n");
  close(srv);
  close(sock);
  close(lsn);
  unlink(sun.sun_path);
  return 0;
}
