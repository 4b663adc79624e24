/* malloc/free from many threads, with frees on other threads than the
 * allocating one; snprintf("%f") and strerror on thread stacks. Built with
 * -fstack-protector-all like every test program here. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include "common.h"

#define THREADS 64
#define ROUNDS 2000

static void *volatile handoff[THREADS];

static void *worker(void *arg) {
  long id = (long)arg;
  unsigned long sum = 0;
  for (int r = 0; r < ROUNDS; r++) {
    size_t n = 16 + (size_t)((id * 131 + r * 17) % 4000);
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    memset(p, (int)(id & 0xff), n);
    /* free what the neighbour left for us, leave ours for the next one */
    void *theirs = __atomic_exchange_n(&handoff[(id + 1) % THREADS], NULL, __ATOMIC_ACQ_REL);
    free(theirs);
    void *old = __atomic_exchange_n(&handoff[id], p, __ATOMIC_ACQ_REL);
    free(old);
    char buf[64];
    snprintf(buf, sizeof buf, "%.3f", (double)id + r / 1000.0);
    sum += strlen(buf) + (unsigned char)buf[0];
    if (r % 100 == 0) {
      const char *s = strerror(ENOENT);
      CHECK(strcmp(s, "No such file or directory") == 0, "strerror: %s", s);
      sched_yield();
    }
  }
  return (void *)sum;
}

int main(void) {
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++) CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)i), 0);
  unsigned long total = 0;
  for (int i = 0; i < THREADS; i++) {
    void *r;
    CHECK_EQ(pthread_join(t[i], &r), 0);
    total += (unsigned long)r;
  }
  for (int i = 0; i < THREADS; i++) free(handoff[i]);
  char buf[64];
  snprintf(buf, sizeof buf, "%f %e %g", 3.14159265, 2.5e-7, 1e100);
  printf("checksum %lu; %s\n", total, buf);
  return 0;
}
