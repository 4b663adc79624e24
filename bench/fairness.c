/* Fairness: 4 CPU-bound threads (no calls in their loops) for 2 s; prints
 * the smallest count divided by the largest (1.0 = perfectly fair). */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#define N 4
static volatile int stop;
static volatile unsigned long counts[N];

static void *spin(void *arg) {
  unsigned long c = 0;
  while (!stop) c++;
  counts[(long)arg] = c;
  return NULL;
}

int main(void) {
  pthread_t t[N];
  for (long i = 0; i < N; i++) pthread_create(&t[i], NULL, spin, (void *)i);
  struct timespec ts = {2, 0};
  nanosleep(&ts, NULL);
  stop = 1;
  unsigned long mn = ~0UL, mx = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    if (counts[i] < mn) mn = counts[i];
    if (counts[i] > mx) mx = counts[i];
  }
  printf("RESULT %.3f min/max of 4 CPU-bound threads' progress in 2 s\n", (double)mn / mx);
  return 0;
}
