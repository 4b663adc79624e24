/* Threads blocked in I/O and sleeps get their events while other threads
 * compute without ever blocking or calling anything: the computing threads
 * wait (spinning on a flag) for the blocked ones to react. A timerfd read,
 * a UDP recv, a TCP accept and a read of a socket written by the spinning
 * thread, and a sleep. With one processor under goshim only the scheduler
 * running timers at each time slice and sysmon polling the network when
 * nobody has for 10 ms can make them run.
 *
 *   netpoll_busy [spinners=2] */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static atomic_int done[5];
static int tids[5]; /* each blocking thread's kernel thread, set just before its call */
static int go[2];   /* the sleeper starts its sleep when main writes here */
static void about_to_block(int i) { __atomic_store_n(&tids[i], self_tid(), __ATOMIC_RELEASE); }
static int tfd, udp, lis, sp[2];
static struct sockaddr_in udp_addr, lis_addr;

static void *timerfd_reader(void *arg) {
  uint64_t v;
  about_to_block(0);
  CHECK(read(tfd, &v, sizeof v) == sizeof v, "timerfd read: %s", strerror(errno));
  atomic_store(&done[0], 1);
  return NULL;
}

static void *udp_reader(void *arg) {
  char b[16];
  about_to_block(1);
  CHECK(recv(udp, b, sizeof b, 0) == 4, "udp recv: %s", strerror(errno));
  atomic_store(&done[1], 1);
  return NULL;
}

static void *acceptor(void *arg) {
  about_to_block(2);
  int c = accept(lis, NULL, NULL);
  CHECK(c >= 0, "accept: %s", strerror(errno));
  close(c);
  atomic_store(&done[2], 1);
  return NULL;
}

static void *sock_reader(void *arg) {
  char b[16];
  about_to_block(3);
  CHECK(read(sp[0], b, sizeof b) == 4, "read: %s", strerror(errno));
  atomic_store(&done[3], 1);
  return NULL;
}

static void *sleeper(void *arg) {
  char c;
  about_to_block(4);
  CHECK(read(go[0], &c, 1) == 1, "go read");
  usleep(20 * 1000); /* the behaviour under test: it ends while the others spin */
  atomic_store(&done[4], 1);
  return NULL;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Spins until every flag is set; no call inside the loop. */
static atomic_int all_done;
static void *spinner(void *arg) {
  unsigned long spins = 0;
  while (!atomic_load_explicit(&all_done, memory_order_relaxed)) spins++;
  return (void *)spins;
}

int main(int argc, char **argv) {
  int nspin = argc > 1 ? atoi(argv[1]) : 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  tfd = timerfd_create(CLOCK_MONOTONIC, 0);
  udp = socket(AF_INET, SOCK_DGRAM, 0);
  udp_addr.sin_family = AF_INET;
  udp_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(udp, (struct sockaddr *)&udp_addr, sizeof udp_addr) == 0, "bind");
  socklen_t sl = sizeof udp_addr;
  getsockname(udp, (struct sockaddr *)&udp_addr, &sl);
  lis = socket(AF_INET, SOCK_STREAM, 0);
  lis_addr.sin_family = AF_INET;
  lis_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(lis, (struct sockaddr *)&lis_addr, sizeof lis_addr) == 0, "bind");
  CHECK(listen(lis, 4) == 0, "listen");
  sl = sizeof lis_addr;
  getsockname(lis, (struct sockaddr *)&lis_addr, &sl);
  /* TCP, not a socketpair: the data must come through the kernel. */
  sp[1] = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(connect(sp[1], (struct sockaddr *)&lis_addr, sizeof lis_addr) == 0, "connect");
  sp[0] = accept(lis, NULL, NULL);
  CHECK(sp[0] >= 0, "accept");

  void *(*fns[])(void *) = {timerfd_reader, udp_reader, acceptor, sock_reader, sleeper};
  CHECK(pipe(go) == 0, "pipe");
  pthread_t t[5];
  for (int i = 0; i < 5; i++) CHECK(pthread_create(&t[i], NULL, fns[i], NULL) == 0, "create");
  for (int i = 0; i < 5; i++) { /* all of them blocked */
    wait_flag(&tids[i]);
    wait_tid_asleep(__atomic_load_n(&tids[i], __ATOMIC_ACQUIRE), (const volatile int *)&done[i]);
  }

  /* The events, then spin without blocking until every thread reacted. */
  pthread_t s[16];
  for (int i = 0; i < nspin && i < 16; i++) pthread_create(&s[i], NULL, spinner, NULL);
  struct itimerspec its = {{0, 0}, {0, 1000 * 1000}};
  timerfd_settime(tfd, 0, &its, NULL);
  int u = socket(AF_INET, SOCK_DGRAM, 0);
  CHECK(sendto(u, "ping", 4, 0, (struct sockaddr *)&udp_addr, sizeof udp_addr) == 4, "sendto");
  int c = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(connect(c, (struct sockaddr *)&lis_addr, sizeof lis_addr) == 0, "connect");
  CHECK(write(sp[1], "data", 4) == 4, "write");
  CHECK(write(go[1], "g", 1) == 1, "go write");
  long long t0 = now_ms();
  unsigned long spins = 0;
  for (;;) {
    int n = 0;
    for (int i = 0; i < 5; i++) n += atomic_load_explicit(&done[i], memory_order_relaxed);
    if (n == 5) break;
    if (++spins % (1 << 20) == 0)
      CHECK(now_ms() - t0 < 30000, "after 30 s, %d of 5 blocked threads have run", n);
  }
  atomic_store(&all_done, 1);
  for (int i = 0; i < nspin && i < 16; i++) pthread_join(s[i], NULL);
  for (int i = 0; i < 5; i++) pthread_join(t[i], NULL);
  printf("timerfd, UDP, accept, TCP read and sleep served while %d threads computed\n", nspin + 1);
  close(c);
  close(u);
  return 0;
}
