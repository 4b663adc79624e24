/* A program that treats every fd number as its own, as daemons do: with
 * threads running, it closes everything from 3 up (close_range, then by
 * hand, then closefrom), checks that no fd is left, takes almost every
 * number with dup2, and then still relies on blocking pipe I/O between
 * threads and on sleeps. A runtime that keeps fds of its own must hide
 * them (close gives EBADF, fcntl sees nothing open) and move them out of
 * the way of the program's dup2 without breaking. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static int top;  /* highest fd number checked (below RLIMIT_NOFILE) */

static void msleep(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static int count_open(void) {
  int n = 0;
  for (int fd = 3; fd <= top; fd++)
    if (fcntl(fd, F_GETFD) != -1) n++;
    else CHECK(errno == EBADF, "fcntl(%d): %s", fd, strerror(errno));
  return n;
}

/* Idle threads: they exist while the fds go. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int quit;

static void *idler(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  while (!quit) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

struct echo {
  int in, out, rounds;
};

static void *echoer(void *arg) {
  struct echo *e = arg;
  for (int i = 0; i < e->rounds; i++) {
    char c;
    CHECK(read(e->in, &c, 1) == 1, "echo read");
    msleep(1);
    CHECK(write(e->out, &c, 1) == 1, "echo write");
  }
  return NULL;
}

/* Blocking I/O between threads over two pipes, with sleeps. */
static void ping_pong(const char *when) {
  int a[2], b[2];
  CHECK(pipe(a) == 0 && pipe(b) == 0, "pipe: %s", strerror(errno));
  struct echo e = {a[0], b[1], 20};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, echoer, &e) == 0, "create");
  int ok = 0;
  for (int i = 0; i < e.rounds; i++) {
    if (i % 5 == 0) msleep(20);  /* the echoer parks in read meanwhile */
    char c = (char)('a' + i), r = 0;
    CHECK(write(a[1], &c, 1) == 1, "write");
    CHECK(read(b[0], &r, 1) == 1, "read");
    ok += r == c;
  }
  pthread_join(t, NULL);
  close(a[0]);
  close(a[1]);
  close(b[0]);
  close(b[1]);
  printf("%s: %d/%d echoes\n", when, ok, e.rounds);
}

static void take_numbers(const char *how, int from, int to) {
  int p[2];
  CHECK(pipe(p) == 0, "pipe");
  int ok = 0;
  for (int fd = from; fd <= to; fd++) {
    if (fd == p[0] || fd == p[1]) continue;
    int r = dup2(p[1], fd);
    CHECK(r == fd || r == -1, "dup2 returned %d", r);
    ok += r == fd;
  }
  printf("%s: dup2 onto %d numbers ok; %d fds open\n", how, ok, count_open());
  /* One of the copies still writes into the pipe. */
  CHECK(write(to, "z", 1) == 1, "write through a copy: %s", strerror(errno));
  char c;
  CHECK(read(p[0], &c, 1) == 1 && c == 'z', "read");
  int closed = 0;
  for (int fd = from; fd <= to; fd++)
    if (fd != p[0] && fd != p[1]) closed += close(fd) == 0;
  close(p[0]);
  close(p[1]);
  printf("%s: closed %d; %d fds open\n", how, closed, count_open());
}

int main(void) {
#if !__GLIBC_PREREQ(2, 34)
  /* Debian 11: glibc 2.31 has neither close_range nor closefrom. */
  fprintf(stderr, "needs glibc 2.34 (close_range, closefrom); this is %d.%d\n", __GLIBC__,
          __GLIBC_MINOR__);
  return 77;
#else
  struct rlimit rl;
  CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
  top = rl.rlim_cur > 1024 ? 1023 : (int)rl.rlim_cur - 1;
  setvbuf(stdout, NULL, _IOLBF, 0);
  pthread_t idlers[3];
  for (int i = 0; i < 3; i++) CHECK(pthread_create(&idlers[i], NULL, idler, NULL) == 0, "create");
  ping_pong("before");

  /* 1. close_range over everything. */
  printf("close_range(3, ~0U, 0) = %d\n", close_range(3, ~0U, 0));
  printf("after close_range: %d fds open\n", count_open());
  int fd = open("/dev/null", O_RDONLY);
  printf("first open: %d\n", fd);
  close(fd);
  ping_pong("after close_range");

  /* 2. Closing every number by hand: nothing was open. */
  int closed = 0, ebadf = 0;
  for (int i = 3; i <= top; i++) {
    if (close(i) == 0)
      closed++;
    else if (errno == EBADF)
      ebadf++;
  }
  printf("close(3..%s): %d closed, every other one EBADF: %d\n", "top", closed,
         ebadf == top - 2 - closed);
  ping_pong("after closing by hand");

  /* 3. dup2 onto (almost) every number, low to high, then onto low
   * numbers again after closefrom. */
  take_numbers("low to high", 3, top - 16);
  ping_pong("after taking the numbers");
  closefrom(3);
  printf("after closefrom(3): %d fds open\n", count_open());
  take_numbers("low numbers", 3, 40);
  ping_pong("at the end");

  pthread_mutex_lock(&mu);
  quit = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < 3; i++) pthread_join(idlers[i], NULL);
  printf("done\n");
  return 0;
#endif
}
