/* Concurrency stress for blocking I/O between threads of one process:
 *  - a byte stream through a pipe and a socketpair, written in random
 *    sizes while the reader alternates between reading at once (data is
 *    handed over or waits in the kernel) and lagging (data piles up in the
 *    kernel): the bytes must arrive complete and in order;
 *  - a ring of threads passing a token through pipes;
 *  - many threads reading one pipe (every message read exactly once);
 *  - many threads accepting on one listener (every connection accepted once).
 * Synchronization is pipes and atomics only. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

static unsigned rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return *s >> 8;
}

/* ---- ordered stream ------------------------------------------------------------------------- */

#define STREAM_BYTES (6 << 20)
static int st_r, st_w;

static void *stream_writer(void *arg) {
  unsigned seed = 1;
  unsigned char buf[4096];
  size_t sent = 0;
  while (sent < STREAM_BYTES) {
    size_t n = 1 + rnd(&seed) % 3000;
    if (n > STREAM_BYTES - sent) n = STREAM_BYTES - sent;
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)((sent + i) * 31 + ((sent + i) >> 13));
    CHECK(write(st_w, buf, n) == (ssize_t)n, "stream write");
    sent += n;
    if (rnd(&seed) % 64 == 0) sched_yield();
  }
  return NULL;
}

static void stream(const char *what, int r, int w) {
  st_r = r;
  st_w = w;
  pthread_t t;
  pthread_create(&t, NULL, stream_writer, NULL);
  unsigned seed = 7;
  unsigned char buf[8192];
  size_t got = 0;
  while (got < STREAM_BYTES) {
    if (rnd(&seed) % 200 == 0) usleep(200);  /* let data pile up in the kernel */
    size_t want = 1 + rnd(&seed) % sizeof buf;
    ssize_t n = read(r, buf, want);
    CHECK(n > 0, "stream read %zd: %s", n, strerror(errno));
    for (ssize_t i = 0; i < n; i++)
      CHECK(buf[i] == (unsigned char)((got + i) * 31 + ((got + i) >> 13)),
            "%s: byte %zu out of order", what, got + i);
    got += (size_t)n;
  }
  pthread_join(t, NULL);
  printf("%s: %d bytes in order\n", what, STREAM_BYTES);
}

/* ---- ring ------------------------------------------------------------------------------------- */

#define RING 64
#define LAPS 2000
static int ring[RING][2];

static void *ring_member(void *arg) {
  int i = (int)(long)arg;
  int v;
  for (int lap = 0; lap < LAPS; lap++) {
    CHECK(read(ring[i][0], &v, sizeof v) == sizeof v, "ring read");
    v++;
    CHECK(write(ring[(i + 1) % RING][1], &v, sizeof v) == sizeof v, "ring write");
  }
  return NULL;
}

static void test_ring(void) {
  for (int i = 0; i < RING; i++) CHECK(pipe(ring[i]) == 0, "pipe");
  pthread_t t[RING];
  for (int i = 1; i < RING; i++) pthread_create(&t[i], NULL, ring_member, (void *)(long)i);
  int v = 0;
  for (int lap = 0; lap < LAPS; lap++) {
    CHECK(write(ring[1][1], &v, sizeof v) == sizeof v, "ring start");
    CHECK(read(ring[0][0], &v, sizeof v) == sizeof v, "ring end");
    v++;
  }
  for (int i = 1; i < RING; i++) pthread_join(t[i], NULL);
  printf("ring of %d threads, %d laps: token %d\n", RING, LAPS, v);
  for (int i = 0; i < RING; i++) {
    close(ring[i][0]);
    close(ring[i][1]);
  }
}

/* ---- many readers on one pipe ------------------------------------------------------------------------ */

#define READERS 32
#define MSGS 50000
static int mr[2];
static atomic_long mr_sum;
static atomic_int mr_count;

static void *many_reader(void *arg) {
  for (;;) {
    int v;
    ssize_t n = read(mr[0], &v, sizeof v);
    CHECK(n == sizeof v, "many read %zd", n);
    if (v < 0) return NULL;
    atomic_fetch_add(&mr_sum, v);
    atomic_fetch_add(&mr_count, 1);
  }
}

static void test_many_readers(void) {
  CHECK(pipe(mr) == 0, "pipe");
  pthread_t t[READERS];
  for (int i = 0; i < READERS; i++) pthread_create(&t[i], NULL, many_reader, NULL);
  long want = 0;
  for (int i = 1; i <= MSGS; i++) {
    CHECK(write(mr[1], &i, sizeof i) == sizeof i, "many write");
    want += i;
  }
  int stop = -1;
  for (int i = 0; i < READERS; i++) CHECK(write(mr[1], &stop, sizeof stop) == sizeof stop, "stop");
  for (int i = 0; i < READERS; i++) pthread_join(t[i], NULL);
  CHECK(atomic_load(&mr_sum) == want, "sum %ld, want %ld", atomic_load(&mr_sum), want);
  printf("%d readers on one pipe: %d messages, each once\n", READERS, atomic_load(&mr_count));
  close(mr[0]);
  close(mr[1]);
}

/* ---- many acceptors on one listener ------------------------------------------------------------------------ */

#define ACCEPTORS 50
#define CONNS 1000
static int lfd;
static atomic_int accepted;
static atomic_int seen[CONNS];

static void *acceptor(void *arg) {
  for (;;) {
    int c = accept(lfd, NULL, NULL);
    CHECK(c >= 0, "accept: %s", strerror(errno));
    int id;
    CHECK(read(c, &id, sizeof id) == sizeof id, "id read");
    close(c);
    if (id < 0) return NULL;
    CHECK(atomic_fetch_add(&seen[id], 1) == 0, "connection %d accepted twice", id);
    atomic_fetch_add(&accepted, 1);
  }
}

static void test_acceptors(void) {
  lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(lfd, 1024) == 0, "listen");
  socklen_t sl = sizeof sa;
  getsockname(lfd, (struct sockaddr *)&sa, &sl);
  pthread_t t[ACCEPTORS];
  for (int i = 0; i < ACCEPTORS; i++) pthread_create(&t[i], NULL, acceptor, NULL);
  for (int i = 0; i < CONNS + ACCEPTORS; i++) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(c, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s", strerror(errno));
    int id = i < CONNS ? i : -1;
    CHECK(write(c, &id, sizeof id) == sizeof id, "id write");
    close(c);
  }
  for (int i = 0; i < ACCEPTORS; i++) pthread_join(t[i], NULL);
  printf("%d acceptors: %d connections, each once\n", ACCEPTORS, atomic_load(&accepted));
  close(lfd);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int p[2], s[2];
  CHECK(pipe(p) == 0, "pipe");
  stream("pipe", p[0], p[1]);
  close(p[0]);
  close(p[1]);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0, "socketpair");
  stream("socketpair", s[0], s[1]);
  close(s[0]);
  close(s[1]);
  test_ring();
  test_many_readers();
  test_acceptors();
  return 0;
}
