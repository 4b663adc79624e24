/* create+join throughput: 20,000 threads in waves of 1,000 (create the
 * wave, then join it). Prints the mean cost of one create+join.
 *   create_join [total] [wave] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *fn(void *arg) { return (void *)((long)arg * 2); }

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  int total = argc > 1 ? atoi(argv[1]) : 20000;
  int wave = argc > 2 ? atoi(argv[2]) : 1000;
  pthread_t *t = malloc(sizeof(pthread_t) * wave);
  long sum = 0;
  /* warm-up wave (not timed): first-touch costs of stacks and allocators */
  for (int i = 0; i < wave; i++) pthread_create(&t[i], NULL, fn, (void *)(long)i);
  for (int i = 0; i < wave; i++) pthread_join(t[i], NULL);
  double t0 = now();
  for (int done = 0; done < total; done += wave) {
    for (int i = 0; i < wave; i++)
      if (pthread_create(&t[i], NULL, fn, (void *)(long)i)) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
      }
    for (int i = 0; i < wave; i++) {
      void *r;
      pthread_join(t[i], &r);
      sum += (long)r;
    }
  }
  double dt = now() - t0;
  if (sum != (long)total / wave * wave * (long)(wave - 1)) {
    fprintf(stderr, "wrong results\n");
    return 1;
  }
  printf("RESULT %.3f us per create+join (%d threads, waves of %d)\n",
         dt * 1e6 / total, total, wave);
  return 0;
}
