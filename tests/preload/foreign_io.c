/* I/O from a kernel thread goshim did not create and from code that runs
 * before goshim initializes. A constructor (it runs before main, so before
 * goshim's runtime is up) makes a pipe and starts a thread; that thread
 * stays a plain kernel thread for the whole run. It does blocking reads,
 * writes, accept, poll and sleeps on fds the goroutines created (which
 * goshim keeps O_NONBLOCK underneath) and they on its: every call must
 * block and return as natively. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static int ctl[2];   /* made before init: main -> foreign thread commands */
static int back[2];  /* made before init: foreign thread -> main */
static pthread_t foreign;

/* The foreign thread's kernel thread id, and the step it is about to block
   in (set just before the call): main waits for that thread to sleep in
   the kernel before it acts, so the call is blocked when data arrives. */
static int foreign_tid, foreign_step;
static void about_to_block(int step) { __atomic_store_n(&foreign_step, step, __ATOMIC_RELEASE); }
static void wait_foreign_blocked(int step) {
  while (__atomic_load_n(&foreign_step, __ATOMIC_ACQUIRE) != step) sched_yield();
  wait_tid_asleep(__atomic_load_n(&foreign_tid, __ATOMIC_ACQUIRE), NULL);
}

static void *foreign_main(void *arg) {
  int fds[2];
  __atomic_store_n(&foreign_tid, self_tid(), __ATOMIC_RELEASE);
  /* 1. The fds of a socketpair main made: a blocking read that waits. */
  CHECK(read(ctl[0], fds, sizeof fds) == sizeof fds, "ctl read");
  char buf[64];
  about_to_block(1);
  ssize_t r = read(fds[1], buf, sizeof buf);
  CHECK(r == 5 && memcmp(buf, "hello", 5) == 0, "foreign read %zd", r);
  /* 2. A timed-out poll on a goroutine's fd (main writes nothing more
     until it has read "world"), then a poll that waits for main's data. */
  struct pollfd p = {fds[1], POLLIN, 0};
  int pr = poll(&p, 1, 50);
  CHECK(pr == 0, "poll timeout %d", pr);
  CHECK(write(fds[1], "world", 5) == 5, "foreign write");
  about_to_block(2);
  pr = poll(&p, 1, -1);
  CHECK(pr == 1 && (p.revents & POLLIN), "poll %d", pr);
  r = read(fds[1], buf, sizeof buf);
  CHECK(r == 3, "read after poll %zd", r);
  /* 3. A large blocking write into a goroutine's socket completes. */
  size_t big = 4 << 20;
  char *data = malloc(big);
  memset(data, 'f', big);
  about_to_block(3);
  r = write(fds[1], data, big);
  CHECK(r == (ssize_t)big, "big write %zd", r);
  free(data);
  /* 4. accept on a goroutine's listener (blocking). */
  int l;
  CHECK(read(ctl[0], &l, sizeof l) == sizeof l, "ctl read 2");
  about_to_block(4);
  int a = accept(l, NULL, NULL);
  CHECK(a >= 0, "foreign accept: %s", strerror(errno));
  CHECK(write(a, "A", 1) == 1, "write accepted");
  close(a);
  /* 5. A sleep (the behaviour under test, not a synchronization). */
  struct timespec ts = {0, 20 * 1000 * 1000};
  CHECK(nanosleep(&ts, NULL) == 0, "nanosleep");
  CHECK(write(back[1], "done", 4) == 4, "back write");
  return NULL;
}

__attribute__((constructor)) static void before_main(void) {
  CHECK(pipe(ctl) == 0 && pipe(back) == 0, "pipes before init");
  CHECK(pthread_create(&foreign, NULL, foreign_main, NULL) == 0, "create before init");
}

int main(void) {
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
  CHECK(write(ctl[1], sv, sizeof sv) == sizeof sv, "ctl write");
  wait_foreign_blocked(1);
  CHECK(write(sv[0], "hello", 5) == 5, "write hello");
  char buf[64];
  ssize_t r = read(sv[0], buf, sizeof buf);  /* a goroutine waits for the foreign thread */
  printf("goroutine <- foreign: %zd '%.*s'\n", r, (int)(r > 0 ? r : 0), buf);
  wait_foreign_blocked(2);
  CHECK(write(sv[0], "abc", 3) == 3, "write abc");
  size_t got = 0, big = 4 << 20;
  char *data = malloc(65536);
  wait_foreign_blocked(3);  /* the foreign writer fills the buffer and blocks first */
  while (got < big) {
    r = read(sv[0], data, 65536);
    CHECK(r > 0, "big read");
    for (ssize_t i = 0; i < r; i++) CHECK(data[i] == 'f', "big data");
    got += (size_t)r;
  }
  free(data);
  printf("goroutine read %zu bytes written in one call by the foreign thread\n", got);

  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 4) == 0, "listen");
  socklen_t sl = sizeof sa;
  getsockname(l, (struct sockaddr *)&sa, &sl);
  CHECK(write(ctl[1], &l, sizeof l) == sizeof l, "ctl write 2");
  wait_foreign_blocked(4);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(connect(c, (struct sockaddr *)&sa, sizeof sa) == 0, "connect");
  r = read(c, buf, 1);
  printf("connection accepted by the foreign thread: %zd '%c'\n", r, buf[0]);
  close(c);
  /* The pipe made before init, now read by a goroutine. */
  r = read(back[0], buf, sizeof buf);
  printf("pipe made before init: %zd '%.*s'\n", r, (int)(r > 0 ? r : 0), buf);
  pthread_join(foreign, NULL);
  close(l);
  printf("done\n");
  return 0;
}
