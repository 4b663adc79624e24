/* Signals interrupting blocked I/O and sleeps, as Linux does it: a handler
 * without SA_RESTART makes a blocked read/accept/recv return EINTR; with
 * SA_RESTART they restart (and a read then gets the data written later),
 * except socket calls with SO_RCVTIMEO; poll, select, epoll_wait and the
 * sleeps always return EINTR (relative sleeps on CLOCK_MONOTONIC and
 * CLOCK_REALTIME with the time left, absolute ones leaving rem alone); a
 * write that was
 * interrupted after some progress returns the partial count.
 *
 * A blocking connect (to a listener whose accept queue is full) returns
 * EINTR, or goes on waiting with SA_RESTART; connect called again after
 * EINTR waits for the attempt under way.
 *
 * Needs signal delivery to a thread blocked in I/O (pthread_kill to a
 * goroutine).
 *
 * No sleeps decide the output. The blocker publishes its kernel thread id
 * and the first signal is sent once that thread sleeps (state S in
 * /proc/self/task/TID/stat: natively inside its call). A call that must
 * end with EINTR (or a partial count) is signalled again and again until
 * it returns (under an M:N runtime a signal may still land before the
 * call: it then only runs the handler early); a call that must restart
 * gets five signals, each once the handler of the one before has run and
 * the call sleeps again, and must still be waiting after the last. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

static atomic_int handled, first_done, blk_tid;
static void on_usr1(int sig) { atomic_fetch_add(&handled, 1); }

static void install(int restart) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
}

static void msleep(int ms) { usleep((useconds_t)ms * 1000); }

static const char *en(long r, int e) {
  if (r >= 0) return "ok";
  return e == EINTR ? "EINTR" : e == EAGAIN ? "EAGAIN" : strerror(e);
}

enum { READ, ACCEPT, RECV_TIMEO, POLL, SELECT, EPOLL, NANOSLEEP, CLOCK_NANOSLEEP, CLOCK_RT,
       CLOCK_ABS, SLEEP, BIGWRITE, CONNECT };
static const char *names[] = {"read", "accept", "recv+SO_RCVTIMEO", "poll", "select",
                              "epoll_wait", "nanosleep", "clock_nanosleep", "clock_nanosleep RT",
                              "clock_nanosleep ABS", "sleep", "big write", "connect"};
static int fd_a, fd_b;
static struct sockaddr_in lsa;
static long result, result2;
static int result_errno, result2_errno;
static struct timespec rem;

static void *blocker(void *arg) {
  int what = (int)(long)arg;
  char buf[16];
  errno = 0;
  atomic_store(&blk_tid, self_tid());
  switch (what) {
    case READ: result = read(fd_a, buf, 1); break;
    case ACCEPT: result = accept(fd_a, NULL, NULL); break;
    case RECV_TIMEO: result = recv(fd_a, buf, 1, 0); break;
    case POLL: {
      struct pollfd p = {fd_a, POLLIN, 0};
      result = poll(&p, 1, -1);
      break;
    }
    case SELECT: {
      fd_set r;
      FD_ZERO(&r);
      FD_SET(fd_a, &r);
      result = select(fd_a + 1, &r, NULL, NULL, NULL);
      break;
    }
    case EPOLL: {
      struct epoll_event ev;
      result = epoll_wait(fd_a, &ev, 1, -1);
      break;
    }
    case NANOSLEEP: {
      struct timespec ts = {5, 0};
      result = nanosleep(&ts, &rem);
      break;
    }
    case CLOCK_NANOSLEEP: {
      struct timespec ts = {5, 0};
      int r = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &rem);
      result = r ? -1 : 0;
      errno = r;
      break;
    }
    case CLOCK_RT: {
      struct timespec ts = {5, 0};
      int r = clock_nanosleep(CLOCK_REALTIME, 0, &ts, &rem);
      result = r ? -1 : 0;
      errno = r;
      break;
    }
    case CLOCK_ABS: {
      /* An absolute sleep is not resumable from rem: rem is left alone. */
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      ts.tv_sec += 5;
      rem.tv_sec = 77;
      rem.tv_nsec = 77;
      int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, &rem);
      result = r ? -1 : 0;
      errno = r;
      break;
    }
    case SLEEP: result = sleep(5); break;
    case CONNECT: {
      /* The accept queue is full: the connect waits for a SYN
       * retransmission. Interrupted, the attempt goes on; a second
       * blocking connect waits for it to finish. */
      result = connect(fd_b, (struct sockaddr *)&lsa, sizeof lsa);
      result_errno = errno;
      atomic_store(&first_done, 1);
      if (result < 0 && errno == EINTR) {
        errno = 0;
        result2 = connect(fd_b, (struct sockaddr *)&lsa, sizeof lsa);
        result2_errno = errno;
      }
      return NULL;
    }
    case BIGWRITE: {
      size_t n = 8 << 20;
      char *d = calloc(1, n);
      result = write(fd_a, d, n);
      free(d);
      break;
    }
  }
  result_errno = errno;
  atomic_store(&first_done, 1);
  return NULL;
}

static void kill_checked(pthread_t t, int what) {
  int k = pthread_kill(t, SIGUSR1);
  CHECK(k == 0, "pthread_kill to a thread blocked in %s: %s (signal delivery to a blocked "
        "thread is needed)", names[what], strerror(k));
}

static void run(int what, int restart) {
  int p[2] = {-1, -1};
  int l = -1, ep = -1, sv[2] = {-1, -1}, fill[2] = {-1, -1};
  switch (what) {
    case READ: case POLL: case SELECT:
      CHECK(pipe(p) == 0, "pipe");
      fd_a = p[0];
      fd_b = p[1];
      break;
    case ACCEPT: {
      l = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in sa = {.sin_family = AF_INET};
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      CHECK(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 4) == 0, "listen");
      socklen_t sl = sizeof lsa;
      getsockname(l, (struct sockaddr *)&lsa, &sl);
      fd_a = l;
      break;
    }
    case CONNECT: {
      l = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in sa = {.sin_family = AF_INET};
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      CHECK(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 1) == 0, "listen");
      socklen_t sl = sizeof lsa;
      getsockname(l, (struct sockaddr *)&lsa, &sl);
      for (int k = 0; k < 2; k++) {
        fill[k] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fill[k], (struct sockaddr *)&lsa, sizeof lsa);
        struct pollfd fp = {fill[k], POLLOUT, 0};
        CHECK(poll(&fp, 1, 5000) == 1, "filler connection");
      }
      fd_a = l;
      fd_b = socket(AF_INET, SOCK_STREAM, 0);
      result2 = -2;
      result2_errno = 0;
      break;
    }
    case RECV_TIMEO: case BIGWRITE: {
      CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
      struct timeval tv = {30, 0};
      if (what == RECV_TIMEO) setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      fd_a = sv[0];
      fd_b = sv[1];
      break;
    }
    case EPOLL: {
      CHECK(pipe(p) == 0, "pipe");
      ep = epoll_create1(0);
      struct epoll_event ev = {.events = EPOLLIN};
      epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
      fd_a = ep;
      fd_b = p[1];
      break;
    }
    default:
      break;
  }
  install(restart);
  atomic_store(&handled, 0);
  atomic_store(&first_done, 0);
  atomic_store(&blk_tid, 0);
  pthread_t t;
  pthread_create(&t, NULL, blocker, (void *)(long)what);
  /* Restarting calls: read and accept with SA_RESTART, and connect with
   * SA_RESTART, which keeps waiting for its attempt. */
  int restarts = restart && (what == READ || what == ACCEPT || what == CONNECT);
  wait_flag((const volatile int *)&blk_tid);
  int tid = atomic_load(&blk_tid);
  wait_tid_asleep(tid, (const volatile int *)&first_done);
  if (restarts) {
    for (int i = 0; i < 5; i++) {
      int before = atomic_load(&handled);
      kill_checked(t, what);
      long long t0 = mono_ns_();
      while (atomic_load(&handled) == before) {
        CHECK(mono_ns_() - t0 < 30000000000LL, "%s: the handler did not run", names[what]);
        sched_yield();
      }
      wait_tid_asleep(tid, (const volatile int *)&first_done); /* in the call again */
      CHECK(!atomic_load(&first_done), "%s with SA_RESTART returned early", names[what]);
    }
  } else {
    /* Until the call returns; at most 60 s. */
    for (int i = 0; i < 6000 && !atomic_load(&first_done); i++) {
      kill_checked(t, what);
      msleep(10);
    }
    CHECK(atomic_load(&first_done), "%s was not interrupted by 6,000 signals", names[what]);
  }
  /* A restarted read or accept is still waiting: let it finish. */
  int c = -1;
  if (what == READ && restart) CHECK(write(fd_b, "r", 1) == 1, "write");
  if (what == ACCEPT && restart) {
    c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(c, (struct sockaddr *)&lsa, sizeof lsa) == 0, "connect");
  }
  if (what == CONNECT) {
    /* Room in the accept queue: the next SYN retransmission gets in. */
    for (int k = 0; k < 2; k++) {
      int a = accept(l, NULL, NULL);
      CHECK(a >= 0, "accept");
      close(a);
    }
  }
  pthread_join(t, NULL);
  printf("%-16s %-10s -> %s", names[what], restart ? "SA_RESTART" : "no restart",
         en(result, result_errno));
  if (what == READ && result >= 0) printf(" (%ld byte)", result);
  if (what == CLOCK_ABS) printf(", rem untouched %d", rem.tv_sec == 77 && rem.tv_nsec == 77);
  if (what == NANOSLEEP || what == CLOCK_NANOSLEEP || what == CLOCK_RT)
    /* rem may exceed the 5 s asked by the timer slack when the signal
     * lands as the sleep starts */
    printf(", rem in (0,5s] %d", result != 0 && rem.tv_sec <= 5 && (rem.tv_sec > 0 || rem.tv_nsec > 0));
  if (what == SLEEP) printf(", seconds left in 1..5 %d", result >= 1 && result <= 5);
  if (what == BIGWRITE) printf(", partial %d", result > 0 && result < (8 << 20));
  if (what == CONNECT && result2 != -2) printf(", connect again -> %s", en(result2, result2_errno));
  printf(", handler ran %s\n", atomic_load(&handled) > 0 ? "yes" : "no");
  if (c >= 0) close(c);
  if (what == ACCEPT && result >= 0) close((int)result);
  if (p[0] >= 0) close(p[0]);
  if (p[1] >= 0) close(p[1]);
  if (l >= 0) close(l);
  if (ep >= 0) close(ep);
  if (sv[0] >= 0) close(sv[0]);
  if (sv[1] >= 0) close(sv[1]);
  if (what == CONNECT) {
    close(fd_b);
    close(fill[0]);
    close(fill[1]);
  }
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int what = READ; what <= CONNECT; what++) {
    run(what, 0);
    run(what, 1);
  }
  return 0;
}
