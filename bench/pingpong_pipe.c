/* Ping-pong of two threads over two pipes: main writes a byte to one pipe
 * and reads the answer from the other; the peer echoes. Prints the mean
 * round-trip time.
 *   pingpong_pipe [round_trips=200000] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int ab[2], ba[2];
static long n;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *peer(void *arg) {
  char c;
  for (long i = 0; i < n + 1000; i++) {
    if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1) {
      fprintf(stderr, "peer I/O failed\n");
      exit(1);
    }
  }
  return NULL;
}

static void rt(char *c) {
  if (write(ab[1], c, 1) != 1 || read(ba[0], c, 1) != 1) {
    fprintf(stderr, "I/O failed\n");
    exit(1);
  }
}

int main(int argc, char **argv) {
  n = argc > 1 ? atol(argv[1]) : 200000;
  if (pipe(ab) || pipe(ba)) return 1;
  pthread_t t;
  pthread_create(&t, NULL, peer, NULL);
  char c = 'x';
  for (int i = 0; i < 1000; i++) rt(&c);  /* warm-up */
  double t0 = now();
  for (long i = 0; i < n; i++) rt(&c);
  double dt = now() - t0;
  pthread_join(t, NULL);
  printf("RESULT %.3f us per round trip (%ld round trips)\n", dt * 1e6 / n, n);
  return 0;
}
