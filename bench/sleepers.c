/* 10,000 threads each sleeping 100 ms twice: the time to create them all,
 * the wall time from the first pthread_create to the last join, and peak
 * RSS.
 *   sleepers [threads=10000] [ms=100] [rounds=2] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int ms, rounds;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *sleeper(void *arg) {
  (void)arg;
  for (int r = 0; r < rounds; r++) usleep((useconds_t)ms * 1000);
  return NULL;
}

static long status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) v = atol(line + strlen(key));
  if (f) fclose(f);
  return v;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10000;
  ms = argc > 2 ? atoi(argv[2]) : 100;
  rounds = argc > 3 ? atoi(argv[3]) : 2;
  pthread_t *t = malloc(sizeof(pthread_t) * n);
  double t0 = now();
  for (int i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, sleeper, NULL)) {
      fprintf(stderr, "pthread_create failed at %d\n", i);
      return 1;
    }
  double created = now() - t0;
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  double dt = now() - t0;
  printf("RESULT %.1f ms to create %d threads\n", created * 1e3, n);
  printf("RESULT %.1f ms wall time for %d threads sleeping %d x %d ms\n", dt * 1e3, n, rounds, ms);
  printf("RESULT %.1f MB peak RSS\n", status_kb("VmHWM:") / 1024.0);
  return 0;
}
