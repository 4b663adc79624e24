/* Signals interrupting a blocking read of a kernel thread goshim did not
 * create (started by a constructor, before main, like foreign_io), on
 * pipes and sockets the goroutines created (which a runtime multiplexing
 * I/O keeps O_NONBLOCK underneath and must then block for the thread):
 *   1. a handler without SA_RESTART: read returns -1/EINTR;
 *   2. a handler with SA_RESTART: the read goes on and returns the data
 *      written after the signals;
 *   3. a socket with SO_RCVTIMEO and a SA_RESTART handler: EINTR (Linux
 *      never restarts a socket call with a timeout);
 *   4. a socket without timeout and a SA_RESTART handler: restarted;
 *   5. a C11 thread and a handler without SA_RESTART: EINTR (a goroutine
 *      under goshim since C11 threads are interposed; before, thrd_create
 *      made a kernel thread goshim did not know). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static int ctl[2];  /* main -> foreign: the fd to read */
static int back[2]; /* foreign -> main: "ready", then the result */
static pthread_t foreign;
static volatile sig_atomic_t handled;
static volatile int reader_tid, read_done; /* set just before / after the read */

static void on_sig(int sig) {
  (void)sig;
  handled++;
}

struct result {
  ssize_t r;
  int err;
  char buf[16];
};

static void one_read(void) {
  int fd;
  CHECK(read(ctl[0], &fd, sizeof fd) == sizeof fd, "ctl read");
  int tid = self_tid();
  __atomic_store_n(&read_done, 0, __ATOMIC_RELEASE);
  CHECK(write(back[1], &tid, sizeof tid) == sizeof tid, "ready");
  struct result res;
  memset(&res, 0, sizeof res);
  res.r = read(fd, res.buf, sizeof res.buf);
  res.err = res.r < 0 ? errno : 0;
  __atomic_store_n(&read_done, 1, __ATOMIC_RELEASE);
  CHECK(write(back[1], &res, sizeof res) == sizeof res, "result");
}

static void *foreign_main(void *arg) {
  (void)arg;
  for (int i = 0; i < 4; i++) one_read();
  return NULL;
}

static int c11_main(void *arg) {
  (void)arg;
  one_read();
  return 0;
}

__attribute__((constructor)) static void before_main(void) {
  CHECK(pipe(ctl) == 0 && pipe(back) == 0, "pipes before init");
  CHECK(pthread_create(&foreign, NULL, foreign_main, NULL) == 0, "create before init");
}

static void install(int sig, int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sig;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(sig, &sa, NULL) == 0, "sigaction");
}

/* Hands fd to the reader, waits until it sleeps in its read (its kernel
   thread in state S), or its read returned. */
static void start_read(int fd) {
  CHECK(write(ctl[1], &fd, sizeof fd) == sizeof fd, "ctl write");
  int tid;
  CHECK(read(back[0], &tid, sizeof tid) == sizeof tid, "ready read");
  reader_tid = tid;
  wait_tid_asleep(tid, &read_done);
}

static struct result get_result(void) {
  struct result res;
  CHECK(read(back[0], &res, sizeof res) == sizeof res, "result read");
  return res;
}

/* Signals the reader until it reports (it must end with EINTR). */
static struct result signal_until_done(pthread_t t, int sig) {
  for (;;) {
    CHECK(pthread_kill(t, sig) == 0, "pthread_kill");
    struct pollfd p = {back[0], POLLIN, 0};
    if (poll(&p, 1, 100) == 1) return get_result();
  }
}

static void print(const char *what, struct result res) {
  printf("%s: %zd %s '%.*s'\n", what, res.r, res.r < 0 ? strerror(res.err) : "",
         (int)(res.r > 0 ? res.r : 0), res.buf);
}

/* Signals three times, each once the handler of the one before ran and
   the reader sleeps again, then writes: the read must return the data. */
static struct result signal_then_write(pthread_t t, int sig, int wfd) {
  handled = 0;
  for (int i = 0; i < 3; i++) {
    CHECK(pthread_kill(t, sig) == 0, "pthread_kill");
    long long t0 = mono_ns_();
    while (handled == i) {
      CHECK(mono_ns_() - t0 < 30000000000LL, "the handler did not run");
      sched_yield();
    }
    wait_tid_asleep(reader_tid, &read_done);
  }
  struct pollfd p = {back[0], POLLIN, 0};
  CHECK(poll(&p, 1, 0) == 0, "the read ended before the data came");
  CHECK(write(wfd, "data", 4) == 4, "write data");
  struct result res = get_result();
  CHECK(handled == 3, "handled %d", (int)handled);
  return res;
}

int main(void) {
  install(SIGUSR1, 0);
  install(SIGUSR2, SA_RESTART);
  int p[2];
  CHECK(pipe(p) == 0, "pipe");

  /* 1 */
  start_read(p[0]);
  print("pipe, handler without SA_RESTART", signal_until_done(foreign, SIGUSR1));
  /* 2 */
  start_read(p[0]);
  print("pipe, SA_RESTART handler", signal_then_write(foreign, SIGUSR2, p[1]));

  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
  struct timeval tv = {30, 0};
  CHECK(setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0, "SO_RCVTIMEO");
  /* 3 */
  start_read(sv[1]);
  print("socket with SO_RCVTIMEO, SA_RESTART handler", signal_until_done(foreign, SIGUSR2));
  /* 4 */
  start_read(sv[0]);
  print("socket, SA_RESTART handler", signal_then_write(foreign, SIGUSR2, sv[1]));
  pthread_join(foreign, NULL);

  /* 5 */
  thrd_t c11;
  CHECK(thrd_create(&c11, c11_main, NULL) == thrd_success, "thrd_create");
  start_read(p[0]);
  /* pthread_t of a C11 thread: thrd_t is the same value in glibc. */
  print("C11 thread, pipe, handler without SA_RESTART", signal_until_done((pthread_t)c11, SIGUSR1));
  thrd_join(c11, NULL);
  printf("done\n");
  return 0;
}
