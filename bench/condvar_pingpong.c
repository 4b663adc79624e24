/* Condition-variable ping-pong: two threads take turns through one mutex
 * and one condition variable. Prints the mean round trip (A -> B -> A).
 *   condvar_pingpong [round_trips] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;
static long n;

static void *player(void *arg) {
  int me = (int)(long)arg;
  for (long i = 0; i < n; i++) {
    pthread_mutex_lock(&mu);
    while (turn != me) pthread_cond_wait(&cv, &mu);
    turn = !me;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
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
  pthread_t a, b;
  double t0 = now();
  pthread_create(&a, NULL, player, (void *)0L);
  pthread_create(&b, NULL, player, (void *)1L);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  double dt = now() - t0;
  printf("RESULT %.1f ns per round trip (%ld round trips)\n", dt * 1e9 / n, n);
  return 0;
}
