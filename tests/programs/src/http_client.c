// A bounded HTTP/1.0 client for the thread-per-connection server case of
// tests/run_programs.sh. Single-threaded, poll(2) over all its sockets; it
// runs natively (the server is the program under test).
//
//   http_client gen DIR NFILES          write DIR/f000.. (deterministic bytes)
//   http_client run PORT PID DIR NFILES HELD TOTAL INFLIGHT
//
// run, phase 1: opens HELD connections to 127.0.0.1:PORT, sends each the
// first line of a request, and waits until the server (process PID) holds
// all of them (each one's server-side socket, found by its inode in
// /proc/net/tcp, is open in /proc/PID/fd): every connection then has a
// live handler thread of its own, blocked reading the rest of its request.
// It samples /proc/PID/task and prints "TASKS n" on stderr, then completes
// every request and checks every response byte for byte against the file.
// (The count of the server's fds is no such test: one the server had open
// when it was first taken and closed later, such as the harness's probe
// connection, left it one short for good.)
// Phase 2: TOTAL more requests, at most INFLIGHT at a time, each checked.
// stdout is deterministic (counts and a checksum of what was received).

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
  fprintf(stderr, "http_client: %s: %s\n", what, strerror(errno));
  exit(2);
}

static void fail(const char *fmt, int a, long b) {
  fprintf(stderr, "http_client: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n");
  exit(1);
}

static size_t file_size(int i) { return (size_t)((i * 7919L * i) % 150001 + i * 13); }

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int gen(const char *dir, int n) {
  mkdir(dir, 0755);
  for (int i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/f%03d", dir, i);
    FILE *f = fopen(path, "w");
    if (!f) die(path);
    uint64_t s = 0x9E3779B97F4A7C15ull ^ (uint64_t)(i + 1);
    size_t sz = file_size(i);
    for (size_t k = 0; k < sz; k++) fputc((int)(rng_next(&s) >> 24) & 0xff, f);
    if (fclose(f) != 0) die(path);
  }
  return 0;
}

static unsigned char **files;
static size_t *sizes;
static int nfiles;

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

// The inodes of the server-side sockets of our connections: the sockets
// of /proc/net/tcp from 127.0.0.1:port to 127.0.0.1:a port in ours[]
// (inode 0: not accepted yet). Returns how many were stored in ino[].
static int server_inodes(int port, const unsigned char *ours, unsigned long *ino, int max) {
  FILE *f = fopen("/proc/net/tcp", "r");
  if (!f) die("/proc/net/tcp");
  char line[512];
  int n = 0;
  unsigned lo = htonl(INADDR_LOOPBACK);  // printed as the raw 32-bit word
  if (!fgets(line, sizeof line, f)) die("/proc/net/tcp header");
  while (fgets(line, sizeof line, f)) {
    unsigned la, lp, ra, rp;
    unsigned long inode;
    if (sscanf(line, " %*d: %x:%x %x:%x %*x %*x:%*x %*x:%*x %*x %*u %*u %lu", &la, &lp, &ra, &rp,
               &inode) != 5)
      continue;
    if (la != lo || ra != lo || (int)lp != port || rp > 65535 || !ours[rp] || inode == 0) continue;
    if (n < max) ino[n++] = inode;
  }
  fclose(f);
  return n;
}

static int cmp_ul(const void *a, const void *b) {
  unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
  return x < y ? -1 : x > y;
}

// How many of our connections process PID (its fd directory: fdpath)
// holds open: its fds that are the server-side sockets of ours[].
static int held_by_server(const char *fdpath, int port, const unsigned char *ours,
                          unsigned long *ino, int max) {
  int n = server_inodes(port, ours, ino, max);
  qsort(ino, (size_t)n, sizeof *ino, cmp_ul);
  DIR *d = opendir(fdpath);
  if (!d) die(fdpath);
  int have = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char link[64];
    ssize_t l = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
    if (l <= 0) continue;  // closed meanwhile
    link[l] = 0;
    unsigned long inode;
    if (sscanf(link, "socket:[%lu]", &inode) == 1 && bsearch(&inode, ino, (size_t)n, sizeof *ino, cmp_ul))
      have++;
  }
  closedir(d);
  return have;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

struct conn {
  int fd;
  int file;
  int state;   // 0 unused, 1 sending, 2 receiving, 3 done
  char req[64];
  size_t reqlen, sent;
  unsigned char *buf;
  size_t len, cap;
};

static uint64_t fnv;
static long ok_count, byte_count;

static int open_conn(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("connect");
  if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0) die("fcntl");
  return fd;
}

static void check_response(struct conn *c) {
  unsigned char *b = c->buf;
  size_t n = c->len;
  unsigned char *end = memmem(b, n, "\r\n\r\n", 4);
  if (!end) fail("conn for file %d: no header end (%ld bytes)", c->file, (long)n);
  size_t hlen = (size_t)(end - b) + 4;
  if (n < 12 || memcmp(b + 9, "200", 3) != 0)
    fail("file %d: status is not 200 (%ld bytes received)", c->file, (long)n);
  char *cl = memmem(b, hlen, "Content-Length: ", 16);
  if (!cl) fail("file %d: no Content-Length (%ld)", c->file, 0);
  long want = strtol(cl + 16, NULL, 10);
  if ((size_t)want != sizes[c->file]) fail("file %d: Content-Length %ld", c->file, want);
  if (n - hlen != sizes[c->file]) fail("file %d: body of %ld bytes", c->file, (long)(n - hlen));
  if (memcmp(b + hlen, files[c->file], sizes[c->file]) != 0)
    fail("file %d: body differs from the file (%ld bytes)", c->file, (long)sizes[c->file]);
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the body, summed (order-free)
  for (size_t k = hlen; k < n; k++) h = (h ^ b[k]) * 0x100000001b3ull;
  fnv += h;
  ok_count++;
  byte_count += (long)(n - hlen);
}

// Drives conns[0..n) in states 1/2 until all are done.
static void pump(struct conn *cs, int n) {
  struct pollfd *p = calloc((size_t)n, sizeof *p);
  int *idx = calloc((size_t)n, sizeof *idx);
  time_t start = time(NULL);
  for (;;) {
    int m = 0;
    for (int i = 0; i < n; i++) {
      if (cs[i].state == 1 || cs[i].state == 2) {
        p[m].fd = cs[i].fd;
        p[m].events = cs[i].state == 1 ? POLLOUT : POLLIN;
        p[m].revents = 0;
        idx[m++] = i;
      }
    }
    if (m == 0) break;
    int r = poll(p, (nfds_t)m, 1000);
    if (r < 0 && errno != EINTR) die("poll");
    if (time(NULL) - start > 120) fail("%d connections still open after %ld s", m, 120);
    for (int k = 0; k < m; k++) {
      if (!p[k].revents) continue;
      struct conn *c = &cs[idx[k]];
      if (c->state == 1) {
        ssize_t w = send(c->fd, c->req + c->sent, c->reqlen - c->sent, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN) die("send");
        if (w > 0 && (c->sent += (size_t)w) == c->reqlen) c->state = 2;
      } else {
        if (c->cap - c->len < 65536) {
          c->cap = c->cap * 2 + 65536;
          c->buf = realloc(c->buf, c->cap);
        }
        ssize_t rd = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (rd < 0 && errno != EAGAIN) die("recv");
        if (rd > 0) c->len += (size_t)rd;
        if (rd == 0) {
          check_response(c);
          close(c->fd);
          free(c->buf);
          c->buf = NULL;
          c->state = 3;
        }
      }
    }
  }
  free(p);
  free(idx);
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "gen") == 0) return gen(argv[2], atoi(argv[3]));
  if (argc != 9 || strcmp(argv[1], "run") != 0) {
    fprintf(stderr, "usage: http_client gen DIR NFILES | run PORT PID DIR NFILES HELD TOTAL INFLIGHT\n");
    return 2;
  }
  int port = atoi(argv[2]);
  const char *pid = argv[3], *dir = argv[4];
  nfiles = atoi(argv[5]);
  int held = atoi(argv[6]), total = atoi(argv[7]), inflight = atoi(argv[8]);
  files = calloc((size_t)nfiles, sizeof *files);
  sizes = calloc((size_t)nfiles, sizeof *sizes);
  for (int i = 0; i < nfiles; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/f%03d", dir, i);
    FILE *f = fopen(path, "r");
    if (!f) die(path);
    sizes[i] = file_size(i);
    files[i] = malloc(sizes[i] + 1);
    if (fread(files[i], 1, sizes[i] + 1, f) != sizes[i]) fail("file %d: size %ld", i, (long)sizes[i]);
    fclose(f);
  }
  char fdpath[64], taskpath[64];
  snprintf(fdpath, sizeof fdpath, "/proc/%s/fd", pid);
  snprintf(taskpath, sizeof taskpath, "/proc/%s/task", pid);

  // Phase 1: HELD connections open at once, each with a handler thread.
  struct conn *cs = calloc((size_t)held, sizeof *cs);
  static unsigned char ours[65536];  // our local ports
  for (int i = 0; i < held; i++) {
    cs[i].fd = open_conn(port);
    cs[i].file = i % nfiles;
    int l = snprintf(cs[i].req, sizeof cs[i].req, "GET /f%03d HTTP/1.0\r\n", cs[i].file);
    if (send(cs[i].fd, cs[i].req, (size_t)l, MSG_NOSIGNAL) != l) die("send first line");
    cs[i].reqlen = (size_t)snprintf(cs[i].req, sizeof cs[i].req, "Host: 127.0.0.1\r\n\r\n");
    cs[i].state = 1;
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    if (getsockname(cs[i].fd, (struct sockaddr *)&me, &ml) != 0) die("getsockname");
    ours[ntohs(me.sin_port)] = 1;
  }
  unsigned long *ino = calloc((size_t)held, sizeof *ino);
  int have = 0;
  for (time_t t0 = time(NULL);;) {  // up to 120 s (by the clock: the machine may be loaded)
    have = held_by_server(fdpath, port, ours, ino, held);
    if (have >= held || time(NULL) - t0 > 120) break;
    sleep_ms(10);
  }
  free(ino);
  if (have < held) fail("the server holds only %d of our %ld connections after 120 s", have, held);
  int tasks = 0;
  for (int s = 0; s < 20; s++) {
    int n = count_dir(taskpath);
    if (n > tasks) tasks = n;
    sleep_ms(5);
  }
  fprintf(stderr, "TASKS %d\n", tasks);
  pump(cs, held);
  printf("held %d connections: %ld responses ok, %ld bytes\n", held, ok_count, byte_count);
  free(cs);

  // Phase 2: TOTAL requests, at most INFLIGHT at a time.
  long ok1 = ok_count, bytes1 = byte_count;
  struct conn *ws = calloc((size_t)inflight, sizeof *ws);
  for (int next = 0; next < total;) {
    int n = 0;
    for (; n < inflight && next < total; n++, next++) {
      memset(&ws[n], 0, sizeof ws[n]);
      ws[n].fd = open_conn(port);
      ws[n].file = (next * 37 + 11) % nfiles;
      ws[n].reqlen = (size_t)snprintf(ws[n].req, sizeof ws[n].req,
                                      "GET /f%03d HTTP/1.0\r\n\r\n", ws[n].file);
      ws[n].state = 1;
    }
    pump(ws, n);
  }
  printf("%d more requests, %d at a time: %ld responses ok, %ld bytes\n", total, inflight,
         ok_count - ok1, byte_count - bytes1);
  printf("checksum %016llx\n", (unsigned long long)fnv);
  return ok_count == held + total ? 0 : 1;
}
