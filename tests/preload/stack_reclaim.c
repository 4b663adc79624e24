/* Memory of finished threads' stacks goes back to the system: 2,000
 * threads each use 256 KiB of stack at once (500 MB resident together);
 * after they are joined those stack pages are no longer resident
 * (natively glibc returns an exited thread's stack pages at once; goshim's
 * pooled stacks give theirs back within a few seconds).
 * Residency is read with mincore() on the exact pages each thread touched,
 * not from VmRSS (an approximate per-CPU counter in this kernel). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common.h"

enum { N = 2000, DEPTH = 256 * 1024, PAGE = 4096 };
static pthread_barrier_t bar, release;  /* all written; measured */
static uintptr_t lo[N];  /* first whole page of each thread's buffer */

/* Pages of [a, a + len) that are resident; unmapped pages count as not. */
static long resident(uintptr_t a, size_t len) {
  static unsigned char vec[DEPTH / PAGE];
  long n = 0;
  for (size_t off = 0; off < len; off += PAGE) {
    if (mincore((void *)(a + off), PAGE, vec) == 0)
      n += vec[0] & 1;
    else
      CHECK(errno == ENOMEM, "mincore: %s", strerror(errno));
  }
  return n;
}

static long all_resident(void) {
  long n = 0;
  for (int i = 0; i < N; i++) n += resident(lo[i], DEPTH - 2 * PAGE);
  return n;
}

static void *deep(void *arg) {
  volatile char buf[DEPTH];
  for (size_t i = 0; i < sizeof buf; i += PAGE / 2) buf[i] = (char)(i / PAGE | 1); /* not zero */
  lo[(long)arg] = ((uintptr_t)buf + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
  pthread_barrier_wait(&bar);
  pthread_barrier_wait(&release);  /* alive until main has measured */
  return (void *)(long)buf[4096];
}

int main(void) {
  static pthread_t t[N];
  CHECK_EQ(pthread_barrier_init(&bar, NULL, N + 1), 0);
  CHECK_EQ(pthread_barrier_init(&release, NULL, N + 1), 0);
  for (long i = 0; i < N; i++) CHECK_EQ(pthread_create(&t[i], NULL, deep, (void *)i), 0);
  pthread_barrier_wait(&bar);
  /* Every thread wrote every page of its buffer and waits on `release`:
   * all resident. (Measuring after a single barrier raced with the threads'
   * exits, and glibc's madvise of exiting stacks.) */
  long pages = (long)N * ((DEPTH - 2 * PAGE) / PAGE);
  long peak = all_resident();
  CHECK(peak == pages, "the threads' stacks were not resident: %ld of %ld pages", peak, pages);
  pthread_barrier_wait(&release);
  for (int i = 0; i < N; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  /* At most a tenth may stay resident (stacks kept for reuse); wait for
   * goshim's pool to give the rest back, at most 20 s. */
  long now = all_resident();
  for (int i = 0; i < 200 && now > pages / 10; i++) {
    usleep(100 * 1000);
    now = all_resident();
  }
  CHECK(now <= pages / 10, "still resident after join: %ld of %ld pages", now, pages);
  printf("stack memory returned\n");
  return 0;
}
