/* A classic thread-per-connection TCP echo server: main accepts in a loop
 * and starts a thread per connection that echoes with blocking read/write.
 * N clients (threads of the same process) connect to 127.0.0.1, all stay
 * connected at once (then the process has 2N+1 threads), then each sends
 * ROUNDS messages of varying sizes and checks the echo byte for byte.
 *
 *   net_echo [clients=5000] [rounds=3]
 *
 * Synchronization uses only pipes, sleeps and atomics (no pthread mutex or
 * condvar), so the test depends on nothing but the I/O layer. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

static int nclients, rounds;
static int port;
static int start_pipe[2];
static atomic_int connected, served, active, max_active, client_ok;

static void fill(unsigned char *buf, int n, int id, int round) {
  for (int i = 0; i < n; i++) buf[i] = (unsigned char)(id * 131 + round * 17 + i * 7);
}

static int msg_size(int id, int round) { return 1 + (int)(((unsigned)id * 977u + (unsigned)round * 4099u) % 16384u); }

static int read_full(int fd, unsigned char *buf, int n) {
  int got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    got += (int)r;
  }
  return got;
}

static void *server(void *arg) {
  int fd = (int)(long)arg;
  int a = atomic_fetch_add(&active, 1) + 1;
  int m = atomic_load(&max_active);
  while (a > m && !atomic_compare_exchange_weak(&max_active, &m, a)) {
  }
  unsigned char buf[8192];
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r == 0) break;
    CHECK(r > 0, "server read: %s", strerror(errno));
    ssize_t w = write(fd, buf, (size_t)r);
    CHECK(w == r, "server write %zd of %zd: %s", w, r, strerror(errno));
  }
  close(fd);
  atomic_fetch_sub(&active, 1);
  atomic_fetch_add(&served, 1);
  return NULL;
}

static void *client(void *arg) {
  int id = (int)(long)arg;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0, "socket: %s", strerror(errno));
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int r;
  while ((r = connect(fd, (struct sockaddr *)&sa, sizeof sa)) < 0 && errno == EINTR) {
  }
  CHECK(r == 0, "client %d connect: %s", id, strerror(errno));
  atomic_fetch_add(&connected, 1);
  char go;
  CHECK(read(start_pipe[0], &go, 1) == 1, "start pipe: %s", strerror(errno));
  unsigned char *out = malloc(16384), *in = malloc(16384);
  for (int round = 0; round < rounds; round++) {
    int n = msg_size(id, round);
    fill(out, n, id, round);
    CHECK(write(fd, out, (size_t)n) == (ssize_t)n, "client write: %s", strerror(errno));
    CHECK(read_full(fd, in, n) == n, "client %d read: %s", id, strerror(errno));
    CHECK(memcmp(in, out, n) == 0, "client %d round %d: echo differs", id, round);
  }
  free(out);
  free(in);
  close(fd);
  atomic_fetch_add(&client_ok, 1);
  return NULL;
}

int main(int argc, char **argv) {
  nclients = argc > 1 ? atoi(argv[1]) : 5000;
  rounds = argc > 2 ? atoi(argv[2]) : 3;
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
  CHECK((rlim_t)(2 * nclients + 64) <= rl.rlim_cur, "RLIMIT_NOFILE %lu too small",
        (unsigned long)rl.rlim_cur);

  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(lfd >= 0, "socket");
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0, "bind: %s", strerror(errno));
  CHECK(listen(lfd, 8192) == 0, "listen");
  socklen_t sl = sizeof sa;
  getsockname(lfd, (struct sockaddr *)&sa, &sl);
  port = ntohs(sa.sin_port);
  CHECK(pipe(start_pipe) == 0, "pipe");

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  pthread_t *clients = malloc(sizeof(pthread_t) * nclients);
  for (int i = 0; i < nclients; i++)
    CHECK(pthread_create(&clients[i], &attr, client, (void *)(long)i) == 0, "client create %d", i);

  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (int i = 0; i < nclients; i++) {
    int fd = accept(lfd, NULL, NULL);
    CHECK(fd >= 0, "accept: %s", strerror(errno));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_t t;
    CHECK(pthread_create(&t, &attr, server, (void *)(long)fd) == 0, "server create %d", i);
  }
  while (atomic_load(&connected) < nclients || atomic_load(&active) < nclients) usleep(1000);
  /* Every client and every server thread is alive and blocked in read. */
  check_kernel_threads("all connected");
  printf("%d connections open at once\n", atomic_load(&active));

  char *go = malloc(nclients);
  memset(go, 'g', nclients);
  CHECK(write(start_pipe[1], go, nclients) == nclients, "start write");
  for (int i = 0; i < nclients; i++) pthread_join(clients[i], NULL);
  while (atomic_load(&served) < nclients) usleep(1000);
  CHECK(atomic_load(&client_ok) == nclients, "clients ok %d", atomic_load(&client_ok));
  CHECK(atomic_load(&max_active) == nclients, "max active %d", atomic_load(&max_active));
  printf("echo ok: %d clients x %d rounds\n", nclients, rounds);
  close(lfd);
  return 0;
}
