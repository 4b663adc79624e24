/* Memory of many threads that allocated once and then wait.
 *
 * A server's connection threads allocate and free buffers of assorted sizes,
 * then sit idle. An allocator that keeps a cache of freed objects per
 * thread keeps it for every idle thread: with 2,000 threads that is
 * hundreds of MiB. This program creates 2,000 threads that each allocate
 * and free 64 blocks of 16 B to 32 KiB twenty times, then wait on a
 * condition variable, and checks that the resident memory grew by less
 * than 64 KiB per thread (glibc: about 21 KiB, stack included).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NTHREADS 2000
#define CEILING_KIB 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER, checked_in = PTHREAD_COND_INITIALIZER;
static int ready, stop, bad;

static void *worker(void *arg) {
  unsigned id = (unsigned)(long)arg;
  void *p[64];
  for (int r = 0; r < 20; r++) {
    for (int i = 0; i < 64; i++) {
      size_t s = (size_t)16 << (i % 12);
      p[i] = malloc(s);
      if (!p[i]) { __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED); continue; }
      memset(p[i], (int)(id + i), s < 256 ? s : 256);
    }
    for (int i = 0; i < 64; i++) {
      if (p[i] && ((unsigned char *)p[i])[0] != (unsigned char)(id + i))
        __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
      free(p[i]);
    }
  }
  pthread_mutex_lock(&mu);
  ready++;
  pthread_cond_signal(&checked_in);
  while (!stop) pthread_cond_wait(&go, &mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  CHECK(f != NULL, "fopen /proc/self/status");
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) v = atol(line + 6);
  fclose(f);
  return v;
}

int main(void) {
  static pthread_t t[NTHREADS];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 << 10);
  long before = rss_kib();
  for (int i = 0; i < NTHREADS; i++)
    CHECK_EQ(pthread_create(&t[i], &attr, worker, (void *)(long)i), 0);
  pthread_mutex_lock(&mu);
  while (ready < NTHREADS) pthread_cond_wait(&checked_in, &mu);
  pthread_mutex_unlock(&mu);
  long after = rss_kib();
  check_kernel_threads("while 2,000 threads wait");
  long per = (after - before) / NTHREADS;
  if (per >= CEILING_KIB)
    fprintf(stderr, "resident memory grew by %ld KiB per idle thread (ceiling %d KiB)\n", per,
            CEILING_KIB);
  pthread_mutex_lock(&mu);
  stop = 1;
  pthread_cond_broadcast(&go);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < NTHREADS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  CHECK(bad == 0, "%d blocks failed or lost their contents", bad);
  printf("%d threads allocated, waited and were joined; memory per idle thread under %d KiB: %s\n",
         NTHREADS, CEILING_KIB, per < CEILING_KIB ? "yes" : "no");
  return per < CEILING_KIB ? 0 : 1;
}
