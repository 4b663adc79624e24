/* futex ping-pong through syscall(SYS_futex): two threads hand a token
 * back and forth with FUTEX_WAIT/FUTEX_WAKE (non-private, as libstdc++'s
 * atomic::wait issues them; "private" as the second argument uses
 * FUTEX_PRIVATE_FLAG, as Rust does). Prints the mean round trip.
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
static int priv;

static void *player(void *arg) {
  int me = (int)(long)arg;
  for (long i = 0; i < n; i++) {
    int v;
    while ((v = __atomic_load_n(&word, __ATOMIC_ACQUIRE)) != me)
      syscall(SYS_futex, &word, FUTEX_WAIT | priv, v, NULL, NULL, 0);
    __atomic_store_n(&word, !me, __ATOMIC_RELEASE);
    syscall(SYS_futex, &word, FUTEX_WAKE | priv, 1, NULL, NULL, 0);
  }
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
  pthread_t a, b;
  double t0 = now();
  pthread_create(&a, NULL, player, (void *)0L);
  pthread_create(&b, NULL, player, (void *)1L);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  double dt = now() - t0;
  printf("RESULT %.1f ns per round trip (%ld round trips, %s)\n", dt * 1e9 / n,
         n, priv ? "FUTEX_PRIVATE_FLAG" : "non-private ops");
  return 0;
}
