/* Memory of finished threads' stacks goes back to the system: 2,000
 * threads each use 256 KiB of stack at once (500 MB resident together);
 * after they are joined the process's resident size falls back near where
 * it started (natively glibc returns an exited thread's stack pages at
 * once; goshim's pooled stacks give theirs back within a few seconds). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

enum { N = 2000, DEPTH = 256 * 1024 };
static pthread_barrier_t bar;

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) v = atol(line + 6);
  if (f) fclose(f);
  return v;
}

static void *deep(void *arg) {
  volatile char buf[DEPTH];
  for (size_t i = 0; i < sizeof buf; i += 4096) buf[i] = (char)i;
  pthread_barrier_wait(&bar);
  return (void *)(long)buf[4096];
}

int main(void) {
  long base = rss_kib();
  static pthread_t t[N];
  CHECK_EQ(pthread_barrier_init(&bar, NULL, N + 1), 0);
  for (int i = 0; i < N; i++) CHECK_EQ(pthread_create(&t[i], NULL, deep, NULL), 0);
  pthread_barrier_wait(&bar);
  long peak = rss_kib();
  CHECK(peak - base > N * (DEPTH / 1024) / 2, "the threads' stacks were not resident: %ld -> %ld KiB", base, peak);
  for (int i = 0; i < N; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  long now = rss_kib();
  for (int i = 0; i < 100 && now - base > 100 * 1024; i++) {
    usleep(100 * 1000);
    now = rss_kib();
  }
  CHECK(now - base <= 100 * 1024, "resident after join: %ld KiB (started at %ld, peak %ld)", now, base, peak);
  printf("stack memory returned\n");
  return 0;
}
