/* A classic thread-per-connection server, as legacy servers are written:
 * main accepts, every connection gets its own thread doing blocking reads
 * and writes. It knows nothing of goshim.
 *
 *   tpc_server [port]     (port 0 or none: any free port)
 *
 * Protocol: the client sends 64-byte requests; the server answers each with
 * 64 bytes (the request with a checksum in its first 8 bytes). Prints
 * "listening PORT" once it accepts connections; runs until killed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

enum { kMsg = 64 };

static int read_full(int fd, char *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r == 0) return 0;
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    got += (size_t)r;
  }
  return 1;
}

static int write_full(int fd, const char *buf, size_t n) {
  size_t put = 0;
  while (put < n) {
    ssize_t w = write(fd, buf + put, n - put);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    put += (size_t)w;
  }
  return 1;
}

static void *serve(void *arg) {
  int fd = (int)(intptr_t)arg;
  char req[kMsg], resp[kMsg];
  while (read_full(fd, req, kMsg) == 1) {
    uint64_t sum = 1469598103934665603ull; /* FNV-1a of the request */
    for (int i = 0; i < kMsg; i++) sum = (sum ^ (unsigned char)req[i]) * 1099511628211ull;
    memcpy(resp, req, kMsg);
    memcpy(resp, &sum, sizeof sum);
    if (write_full(fd, resp, kMsg) != 1) break;
  }
  close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 0;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons((uint16_t)port);
  if (bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(ls, 4096) != 0) {
    perror("tpc_server: bind/listen");
    return 1;
  }
  socklen_t len = sizeof sa;
  getsockname(ls, (struct sockaddr *)&sa, &len);
  printf("listening %d\n", ntohs(sa.sin_port));
  fflush(stdout);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (;;) {
    int c = accept(ls, NULL, NULL);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        usleep(1000);
        continue;
      }
      perror("tpc_server: accept");
      return 1;
    }
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_t t;
    int err = pthread_create(&t, &attr, serve, (void *)(intptr_t)c);
    if (err != 0) {
      fprintf(stderr, "tpc_server: pthread_create: %s\n", strerror(err));
      close(c);
    }
  }
}
