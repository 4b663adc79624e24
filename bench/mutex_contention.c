/* Mutex contention: T threads each do N lock/increment/unlock rounds on one
 * mutex, with a little work outside the lock. Prints the throughput in
 * million lock acquisitions per second (higher is better) and checks the
 * counter.
 *   mutex_contention [threads] [rounds_per_thread] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static long rounds;

static void *worker(void *arg) {
  unsigned x = (unsigned)(long)arg * 2654435761u + 1;
  for (long i = 0; i < rounds; i++) {
    pthread_mutex_lock(&mu);
    counter++;
    pthread_mutex_unlock(&mu);
    for (int k = 0; k < 20; k++) x = x * 1103515245u + 12345u; /* work outside */
  }
  return (void *)(long)(x & 1);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  int t = argc > 1 ? atoi(argv[1]) : 4;
  rounds = argc > 2 ? atol(argv[2]) : 10000000 / t;
  pthread_t *th = malloc(sizeof(pthread_t) * t);
  double t0 = now();
  for (int i = 0; i < t; i++) pthread_create(&th[i], NULL, worker, (void *)(long)i);
  for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
  double dt = now() - t0;
  if (counter != rounds * t) {
    fprintf(stderr, "counter %ld, expected %ld\n", counter, rounds * t);
    return 1;
  }
  printf("RESULT %.2f M locks/s (%d threads x %ld)\n",
         counter / dt / 1e6, t, rounds);
  return 0;
}
