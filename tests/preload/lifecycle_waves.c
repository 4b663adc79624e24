/* 100,000 threads created and joined in waves of 10,000 live threads.
 * In each wave thread i joins thread i-1 and returns its result plus i, so
 * all 10,000 are alive (blocked in pthread_join) at once; the first waits
 * for a flag with sched_yield. The chain's final value checks every result.
 * PER_WAVE (default and at most 10,000) sets the live threads of a wave:
 * the native run uses fewer (cases.txt), as 10,000 kernel threads of one
 * process do not fit beside other programs' under the default pid_max
 * (32,768, shared by every PID namespace): pthread_create failed with
 * EAGAIN natively in a Debian 12 chroot while other tests ran. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include "common.h"

#define WAVES 10
#define MAX_PER_WAVE 10000

static pthread_t th[MAX_PER_WAVE];
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
  const long PER_WAVE = env_int("PER_WAVE", MAX_PER_WAVE);
  CHECK(PER_WAVE >= 2 && PER_WAVE <= MAX_PER_WAVE, "PER_WAVE %ld: 2 to %d", PER_WAVE, MAX_PER_WAVE);
  for (int w = 0; w < WAVES; w++) {
    go = 0;
    for (long i = 0; i < PER_WAVE; i++) {
      int e = pthread_create(&th[i], NULL, link_fn, (void *)i);
      CHECK(e == 0, "wave %d: pthread_create %ld failed: %d", w, i, e);
    }
    int k = check_kernel_threads("a wave's threads alive");
    if (k > max_seen) max_seen = k;
    go = 1;
    void *r;
    CHECK_EQ(pthread_join(th[PER_WAVE - 1], &r), 0);
    CHECK_EQ((long)r, (long)PER_WAVE * (PER_WAVE - 1) / 2);
  }
  printf("created and joined %ld threads in %d waves of %ld\n", WAVES * PER_WAVE, WAVES, PER_WAVE);
  fprintf(stderr, "peak kernel threads: %d\n", max_seen);
  return 0;
}
