/* A thread-per-connection server's accept loop while other threads
 * compute: every connection must be served while the computing threads
 * are still at work.
 *
 * NSPIN threads each do a fixed amount of arithmetic (SPIN_CHUNKS chunks)
 * and stop early once the client is done. Only after all of them have
 * started (a condvar handshake) do an acceptor thread (accept, read one
 * byte, echo it, close) and a client thread (connect, write one byte,
 * read the echo, close; NCONN times in a row) start on a loopback
 * listener. Each round trip waits for the network twice (the listener
 * becoming readable, the echo arriving). The check: when the client has
 * its NCONN echoes, no computing thread has finished its work.
 *
 * Natively the kernel runs a woken thread within a few milliseconds
 * among the computing ones (the computing threads got to chunk 8 of 400
 * here). A scheduler that queues what the network readies behind the
 * computing threads needs about NSPIN time slices per wait: they got to
 * chunk 850 before the client was done. With one or two time slices per
 * wait, about chunk 75-140.
 *
 * Prints one line; exit 0 on success, 1 on failure (with a reason on
 * stderr). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NSPIN 16
#define NCONN 30
#define SPIN_CHUNKS 400 /* chunks of about 1 ms of arithmetic each */
#define CHUNK_ITERS 1000000

static atomic_int stop_spin;
static atomic_int spinners_done;
static int started;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int lfd;
static struct sockaddr_in addr;
static int failed;

static void fail(const char *what) {
  perror(what);
  failed = 1;
}

static void *spinner(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  started++;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  volatile unsigned long x = 1;
  for (int c = 0; c < SPIN_CHUNKS; c++) {
    if (atomic_load_explicit(&stop_spin, memory_order_relaxed)) return NULL;
    for (int i = 0; i < CHUNK_ITERS; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
  }
  atomic_fetch_add(&spinners_done, 1);
  return NULL;
}

static void *acceptor(void *arg) {
  (void)arg;
  for (int i = 0; i < NCONN; i++) {
    int c = accept(lfd, NULL, NULL);
    if (c < 0) {
      fail("accept");
      return NULL;
    }
    char b;
    if (read(c, &b, 1) != 1 || write(c, &b, 1) != 1) {
      fail("acceptor read/write");
      close(c);
      return NULL;
    }
    close(c);
  }
  return NULL;
}

static void *client(void *arg) {
  (void)arg;
  for (int i = 0; i < NCONN; i++) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) {
      fail("socket");
      break;
    }
    if (connect(s, (struct sockaddr *)&addr, sizeof addr) != 0) {
      fail("connect");
      close(s);
      break;
    }
    char b = (char)('a' + i % 26), r = 0;
    if (write(s, &b, 1) != 1 || read(s, &r, 1) != 1 || r != b) {
      fail("client write/read");
      close(s);
      break;
    }
    close(s);
  }
  return NULL;
}

int main(void) {
  lfd = socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) {
    perror("socket");
    return 1;
  }
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof addr;
  if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, NCONN) != 0 ||
      getsockname(lfd, (struct sockaddr *)&addr, &al) != 0) {
    perror("bind/listen");
    return 1;
  }

  pthread_t sp[NSPIN], at, ct;
  for (int i = 0; i < NSPIN; i++)
    if (pthread_create(&sp[i], NULL, spinner, NULL) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  pthread_mutex_lock(&mu);
  while (started < NSPIN) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);

  if (pthread_create(&at, NULL, acceptor, NULL) != 0 || pthread_create(&ct, NULL, client, NULL) != 0) {
    fprintf(stderr, "pthread_create failed\n");
    return 1;
  }
  pthread_join(ct, NULL);
  int done_first = atomic_load(&spinners_done);
  atomic_store(&stop_spin, 1);
  pthread_join(at, NULL);
  for (int i = 0; i < NSPIN; i++) pthread_join(sp[i], NULL);
  close(lfd);
  if (failed) return 1;
  if (done_first != 0) {
    fprintf(stderr,
            "accept_beside_spinners: %d of %d computing threads finished their work before "
            "%d connections were served\n",
            done_first, NSPIN, NCONN);
    return 1;
  }
  printf("served %d connections while %d threads computed\n", NCONN, NSPIN);
  return 0;
}
