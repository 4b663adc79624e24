/* 4 CPU-bound threads share the processors fairly for 2 s: the smallest
 * count is at least half the largest (at GOSHIM_MAXPROCS=1 only preemption
 * can give the others a turn). The loops make no calls. */
#include <pthread.h>
#include <time.h>
#include "common.h"

#define N 4
static volatile int stop;
static volatile unsigned long counts[N];

static void *spin(void *arg) {
  long id = (long)arg;
  unsigned long c = 0;
  while (!stop) c++;
  counts[id] = c;
  return NULL;
}

int main(void) {
  pthread_t t[N];
  for (long i = 0; i < N; i++) CHECK_EQ(pthread_create(&t[i], NULL, spin, (void *)i), 0);
  struct timespec ts = {2, 0};
  nanosleep(&ts, NULL);
  stop = 1;
  for (int i = 0; i < N; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  unsigned long mn = counts[0], mx = counts[0];
  for (int i = 1; i < N; i++) {
    if (counts[i] < mn) mn = counts[i];
    if (counts[i] > mx) mx = counts[i];
  }
  fprintf(stderr, "counts %lu %lu %lu %lu, min/max %.3f\n", counts[0], counts[1], counts[2],
          counts[3], (double)mn / mx);
  CHECK(mx > 0 && (double)mn / mx >= 0.5, "min/max %.3f < 0.5", (double)mn / mx);
  printf("4 CPU-bound threads progressed fairly\n");
  return 0;
}
