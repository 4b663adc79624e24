/* 4 CPU-bound threads all get turns: each loop (no calls at all) counts,
 * and watches the other threads' counters; it is done once it has seen
 * every other thread make progress 25 times, and it keeps counting until
 * all four are done. At GOSHIM_MAXPROCS=1 only preemption can give the
 * others a turn: without it the first thread spins forever (the runner's
 * timeout fails the test). No timing is measured. */
#include <pthread.h>
#include <stdatomic.h>
#include "common.h"

#define N 4
#define SEEN 25
static volatile unsigned long counts[N];
static atomic_int ndone;

static void *spin(void *arg) {
  long id = (long)arg;
  unsigned long last[N] = {0};
  int seen[N] = {0};
  int done = 0;
  while (atomic_load_explicit(&ndone, memory_order_relaxed) < N) {
    counts[id]++;
    if (done) continue;
    int all = 1;
    for (int j = 0; j < N; j++) {
      if (j == id) continue;
      unsigned long c = counts[j];
      if (c != last[j]) {
        last[j] = c;
        seen[j]++;
      }
      if (seen[j] < SEEN) all = 0;
    }
    if (all) {
      done = 1;
      atomic_fetch_add(&ndone, 1);
    }
  }
  return NULL;
}

int main(void) {
  pthread_t t[N];
  for (long i = 0; i < N; i++) CHECK_EQ(pthread_create(&t[i], NULL, spin, (void *)i), 0);
  for (int i = 0; i < N; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  printf("4 CPU-bound threads each saw the others progress %d times\n", SEEN);
  return 0;
}
