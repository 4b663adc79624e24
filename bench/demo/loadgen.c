/* Load client for the demo: CONNS keep-alive connections to 127.0.0.1:PORT,
 * each a closed loop of 64-byte requests (send, wait for the answer, send
 * the next), driven by one thread with epoll. Checks every answer.
 *
 *   loadgen PORT CONNS SECONDS
 *
 * Connects in batches (every connection's first answer proves the server
 * accepted it), then measures for SECONDS and prints
 *   RESULT conns=N rps=R p50_us=A p99_us=B max_us=C errors=E            */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kMsg = 64, kBatch = 256 };

struct conn {
  int fd;
  int state;  /* 0 connecting, 1 waiting for an answer */
  int got;    /* bytes of the answer read */
  uint32_t seq;
  int64_t sent_ns;
  char req[kMsg], resp[kMsg];
};

static struct conn *conns;
static int ep, nconns, answered_first;
static int measuring;
static uint64_t completed, errors;
static uint64_t hist[64 * 40];
static int64_t max_ns;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Log-linear histogram of microseconds: 64 buckets per power of two. */
static int bucket(uint64_t us) {
  if (us < 64) return (int)us;
  int e = 63 - __builtin_clzll(us);
  int i = 64 * (e - 5) + (int)((us >> (e - 6)) - 64);
  return i < (int)(sizeof hist / sizeof hist[0]) ? i : (int)(sizeof hist / sizeof hist[0]) - 1;
}
static uint64_t bucket_value(int i) {
  if (i < 64) return (uint64_t)i;
  int e = i / 64 + 5, sub = i % 64;
  return (uint64_t)(64 + sub) << (e - 6);
}
static uint64_t percentile(double p) {
  uint64_t total = 0, acc = 0;
  for (size_t i = 0; i < sizeof hist / sizeof hist[0]; i++) total += hist[i];
  if (!total) return 0;
  uint64_t want = (uint64_t)(p * total);
  for (size_t i = 0; i < sizeof hist / sizeof hist[0]; i++) {
    acc += hist[i];
    if (acc > want) return bucket_value((int)i);
  }
  return 0;
}

static uint64_t fnv(const char *p) {
  uint64_t sum = 1469598103934665603ull;
  for (int i = 0; i < kMsg; i++) sum = (sum ^ (unsigned char)p[i]) * 1099511628211ull;
  return sum;
}

static void send_req(struct conn *c) {
  c->seq++;
  memset(c->req, 'a' + c->seq % 26, kMsg);
  memcpy(c->req, &c->seq, sizeof c->seq);
  memcpy(c->req + 8, &c->fd, sizeof c->fd);
  c->got = 0;
  c->sent_ns = now_ns();
  ssize_t w = write(c->fd, c->req, kMsg); /* 64 bytes into an empty socket buffer */
  if (w != kMsg) {
    errors++;
    fprintf(stderr, "loadgen: short write (%zd): %s\n", w, strerror(errno));
    exit(1);
  }
}

static void on_event(struct conn *c, uint32_t ev) {
  if (c->state == 0) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) {
      fprintf(stderr, "loadgen: connect: %s\n", strerror(err));
      exit(1);
    }
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
    c->state = 1;
    send_req(c);
    return;
  }
  if (ev & (EPOLLERR | EPOLLHUP)) {
    fprintf(stderr, "loadgen: connection closed by the server\n");
    exit(1);
  }
  ssize_t r = read(c->fd, c->resp + c->got, kMsg - c->got);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (r <= 0) {
    fprintf(stderr, "loadgen: read: %s\n", r == 0 ? "EOF" : strerror(errno));
    exit(1);
  }
  c->got += (int)r;
  if (c->got < kMsg) return;
  uint64_t want = fnv(c->req), sum;
  memcpy(&sum, c->resp, sizeof sum);
  if (sum != want || memcmp(c->resp + 8, c->req + 8, kMsg - 8) != 0) errors++;
  if (c->seq == 1) answered_first++;
  if (measuring) {
    int64_t d = now_ns() - c->sent_ns;
    if (d > max_ns) max_ns = d;
    hist[bucket((uint64_t)(d / 1000))]++;
    completed++;
  }
  send_req(c);
}

static void poll_once(int timeout_ms) {
  struct epoll_event evs[512];
  int n = epoll_wait(ep, evs, 512, timeout_ms);
  for (int i = 0; i < n; i++) on_event(evs[i].data.ptr, evs[i].events);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: loadgen PORT CONNS SECONDS\n");
    return 2;
  }
  int port = atoi(argv[1]);
  nconns = atoi(argv[2]);
  double secs = atof(argv[3]);
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  conns = calloc(nconns, sizeof *conns);
  ep = epoll_create1(0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons((uint16_t)port);
  int64_t t0 = now_ns();
  for (int i = 0; i < nconns; i += kBatch) {
    int end = i + kBatch < nconns ? i + kBatch : nconns;
    for (int j = i; j < end; j++) {
      struct conn *c = &conns[j];
      c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      if (c->fd < 0) {
        perror("loadgen: socket");
        return 1;
      }
      int one = 1;
      setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) {
        perror("loadgen: connect");
        return 1;
      }
      struct epoll_event e = {.events = EPOLLOUT, .data.ptr = c};
      epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e);
    }
    while (answered_first < end) {
      poll_once(100);
      if (now_ns() - t0 > 60ll * 1000000000) {
        fprintf(stderr, "loadgen: only %d of %d connections answered within 60 s\n",
                answered_first, end);
        return 1;
      }
    }
  }
  fprintf(stderr, "loadgen: %d connections up in %.2f s\n", nconns, (now_ns() - t0) / 1e9);
  printf("CONNECTED\n");
  fflush(stdout);
  measuring = 1;
  int64_t start = now_ns(), stop = start + (int64_t)(secs * 1e9);
  while (now_ns() < stop) poll_once(10);
  double el = (now_ns() - start) / 1e9;
  printf("RESULT conns=%d rps=%.0f p50_us=%llu p99_us=%llu max_us=%lld errors=%llu\n", nconns,
         completed / el, (unsigned long long)percentile(0.50), (unsigned long long)percentile(0.99),
         (long long)(max_ns / 1000), (unsigned long long)errors);
  return errors ? 1 : 0;
}
