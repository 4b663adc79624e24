/* Load client for echo_server (not a benchmark by itself): one thread,
 * epoll, CONNS connections to 127.0.0.1:PORT, each sending MSG-byte
 * requests and waiting for the echo before the next. After a warm-up it
 * counts completed requests for SECONDS and records each one's latency.
 * Prints RESULT lines: requests/s, median and 99th percentile latency.
 *   echo_client PORT CONNS SECONDS [MSG=64] */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HIST 5000000 /* 1 us buckets up to 5 s (19,000 connections wait ~100-300 ms) */

struct conn {
  int fd;
  int got;
  double sent;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned hist[HIST + 1]; /* bss: only the pages hit are touched */
static char msg[4096];
static int msgsize;

static void send_req(struct conn *c) {
  c->got = 0;
  c->sent = now();
  if (write(c->fd, msg, msgsize) != msgsize) {
    perror("echo_client write");
    exit(2);
  }
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int port = atoi(argv[1]), nconn = atoi(argv[2]);
  double secs = atof(argv[3]);
  msgsize = argc > 4 ? atoi(argv[4]) : 64;
  memset(msg, 'm', sizeof msg);
  /* The server may run pinned: the client uses every CPU. */
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int i = 0; i < CPU_SETSIZE; i++) CPU_SET(i, &all);
  sched_setaffinity(0, sizeof all, &all);
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);

  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ep = epoll_create1(0);
  struct conn *cs = calloc(nconn, sizeof *cs);
  int one = 1;
  for (int i = 0; i < nconn; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
      perror("echo_client connect");
      return 2;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    cs[i].fd = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }
  for (int i = 0; i < nconn; i++) send_req(&cs[i]);
  double start = now(), warm = start + 0.5, end = warm + secs;
  long done = 0;
  struct epoll_event evs[512];
  char buf[4096];
  for (;;) {
    int n = epoll_wait(ep, evs, 512, 1000);
    double t = now();
    if (t >= end) break;
    for (int i = 0; i < n; i++) {
      struct conn *c = evs[i].data.ptr;
      ssize_t r = read(c->fd, buf, sizeof buf);
      if (r <= 0) {
        fprintf(stderr, "echo_client: read %zd\n", r);
        return 2;
      }
      c->got += (int)r;
      if (c->got < msgsize) continue;
      if (t >= warm) {
        long us = (long)((t - c->sent) * 1e6);
        hist[us < HIST ? us : HIST]++;
        done++;
      }
      send_req(c);
    }
  }
  long p50 = -1, p99 = -1, acc = 0;
  for (long i = 0; i <= HIST; i++) {
    acc += hist[i];
    if (p50 < 0 && acc * 2 >= done) p50 = i;
    if (p99 < 0 && acc * 100 >= done * 99) p99 = i;
  }
  printf("RESULT %.0f requests/s (%d connections, %d-byte messages)\n", done / secs,
         nconn, msgsize);
  printf("RESULT %ld us median latency\n", p50);
  printf("RESULT %ld us 99th percentile latency\n", p99);
  fflush(stdout);
  return 0;
}
