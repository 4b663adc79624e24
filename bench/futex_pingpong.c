/* futex ping-pong through syscall(SYS_futex): two threads hand a token
 * back and forth with FUTEX_WAIT/FUTEX_WAKE (non-private, as libstdc++'s
 * atomic::wait issues them; "private" as the second argument uses
 * FUTEX_PRIVATE_FLAG, as Rust does). Prints the mean round trip of the
 * best of 10 timed segments, after a tenth as many untimed round trips.
 *   futex_pingpong [round_trips] [private] */
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int word; /* whose turn: 0 or 1 */
static long n;
static long warm; /* untimed round trips first: thread start-up, first faults */
static double t_start, best_seg = 1e30; /* best segment: least disturbed by other processes */
#define SEGMENTS 10
static int priv;

static double now(void);

static void *player(void *arg) {
  int me = (int)(long)arg;
  for (long i = 0; i < warm + n; i++) {
    if (me == 0 && i >= warm && (i - warm) % (n / SEGMENTS) == 0) {
      double t = now();
      if (i > warm && (t - t_start) < best_seg) best_seg = t - t_start;
      t_start = t;
    }
    int v;
    while ((v = __atomic_load_n(&word, __ATOMIC_ACQUIRE)) != me)
      syscall(SYS_futex, &word, FUTEX_WAIT | priv, v, NULL, NULL, 0);
    __atomic_store_n(&word, !me, __ATOMIC_RELEASE);
    syscall(SYS_futex, &word, FUTEX_WAKE | priv, 1, NULL, NULL, 0);
  }
  if (me == 0 && now() - t_start < best_seg) best_seg = now() - t_start;
  return NULL;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  n = argc > 1 ? atol(argv[1]) : 200000;
  priv = argc > 2 && strcmp(argv[2], "private") == 0 ? FUTEX_PRIVATE_FLAG : 0;
  warm = n / 10;
  pthread_t a, b;
  pthread_create(&a, NULL, player, (void *)0L);
  pthread_create(&b, NULL, player, (void *)1L);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  double dt = best_seg * SEGMENTS; /* as if every segment ran like the best one */
  printf("RESULT %.1f ns per round trip (best of %d segments of %ld round trips, %s)\n",
         dt * 1e9 / n, SEGMENTS, n / SEGMENTS, priv ? "FUTEX_PRIVATE_FLAG" : "non-private ops");
  return 0;
}
