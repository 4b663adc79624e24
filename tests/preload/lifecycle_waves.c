/* 100,000 threads created and joined in waves of 10,000 live threads.
 * In each wave thread i joins thread i-1 and returns its result plus i, so
 * all 10,000 are alive (blocked in pthread_join) at once; the first waits
 * for a flag with sched_yield. The chain's final value checks every result. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include "common.h"

#define WAVES 10
#define PER_WAVE 10000

static pthread_t th[PER_WAVE];
static volatile int go;

static void *link_fn(void *arg) {
  long i = (long)arg;
  long prev = 0;
  if (i == 0) {
    while (!go) sched_yield();
  } else {
    void *r;
    CHECK_EQ(pthread_join(th[i - 1], &r), 0);
    prev = (long)r;
  }
  return (void *)(prev + i);
}

int main(void) {
  int max_seen = 0;
  for (int w = 0; w < WAVES; w++) {
    go = 0;
    for (long i = 0; i < PER_WAVE; i++) {
      int e = pthread_create(&th[i], NULL, link_fn, (void *)i);
      CHECK(e == 0, "wave %d: pthread_create %ld failed: %d", w, i, e);
    }
    int k = check_kernel_threads("10,000 threads alive");
    if (k > max_seen) max_seen = k;
    go = 1;
    void *r;
    CHECK_EQ(pthread_join(th[PER_WAVE - 1], &r), 0);
    CHECK_EQ((long)r, (long)PER_WAVE * (PER_WAVE - 1) / 2);
  }
  printf("created and joined %d threads in %d waves of %d\n", WAVES * PER_WAVE, WAVES, PER_WAVE);
  fprintf(stderr, "peak kernel threads: %d\n", max_seen);
  return 0;
}
