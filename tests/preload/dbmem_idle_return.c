/* Memory freed by a burst of connections goes back to the system while
 * the process idles.
 *
 * A thread-per-connection server allocates large buffers for each
 * connection (MariaDB: statement memory, sort buffers) and frees them when
 * the connection closes; then the server may sit idle for hours. glibc
 * returns a block of 128 KiB or more to the kernel at free (it is a
 * mapping of its own). An allocator that keeps freed pages for reuse must
 * still give them back after a while, even when nothing allocates any
 * more.
 *
 * 32 threads each allocate 8 blocks of 256 KiB and write every page; once
 * all blocks exist (a barrier: glibc raises its mapping threshold at the
 * first such free), every thread frees its blocks and exits. The main
 * thread then watches the freed pages with mincore (an unmapped range
 * counts as not resident) and waits, polling every 0.1 s for at most 60 s
 * without allocating, until at most 1/8 of them are resident.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define NTHREADS 32
#define NBLOCKS 8
#define BLOCK (256 << 10)

static pthread_barrier_t all_allocated;
static char *blocks[NTHREADS][NBLOCKS];
static long page;

static void *conn(void *arg) {
  int id = (int)(long)arg;
  for (int i = 0; i < NBLOCKS; i++) {
    char *p = malloc(BLOCK);
    CHECK(p != NULL, "malloc");
    for (long o = 0; o < BLOCK; o += page) p[o] = (char)(id + i + 1);
    blocks[id][i] = p;
  }
  pthread_barrier_wait(&all_allocated);
  for (int i = 0; i < NBLOCKS; i++) {
    char *p = blocks[id][i];
    for (long o = 0; o < BLOCK; o += page)
      CHECK(p[o] == (char)(id + i + 1), "block %d of thread %d lost its contents", i, id);
    free(p);
  }
  return NULL;
}

/* Resident pages of the freed blocks (no allocation). */
static long resident_pages(void) {
  static unsigned char vec[BLOCK / 4096 + 2];
  long n = 0;
  for (int t = 0; t < NTHREADS; t++)
    for (int i = 0; i < NBLOCKS; i++) {
      uintptr_t lo = (uintptr_t)blocks[t][i] & ~(uintptr_t)(page - 1);
      uintptr_t hi = ((uintptr_t)blocks[t][i] + BLOCK + page - 1) & ~(uintptr_t)(page - 1);
      for (uintptr_t a = lo; a < hi; a += page) {
        /* Page by page: part of a block may be unmapped (ENOMEM). */
        if (mincore((void *)a, page, vec) == 0) {
          n += vec[0] & 1;
        } else {
          CHECK(errno == ENOMEM, "mincore: %s", strerror(errno));
        }
      }
    }
  return n;
}

int main(void) {
  page = sysconf(_SC_PAGESIZE);
  CHECK(page > 0 && page <= 4096 * 16, "page size");
  pthread_t th[NTHREADS];
  CHECK_EQ(pthread_barrier_init(&all_allocated, NULL, NTHREADS), 0);
  for (int t = 0; t < NTHREADS; t++)
    CHECK_EQ(pthread_create(&th[t], NULL, conn, (void *)(long)t), 0);
  for (int t = 0; t < NTHREADS; t++) CHECK_EQ(pthread_join(th[t], NULL), 0);

  long total = (long)NTHREADS * NBLOCKS * (BLOCK / page);
  long ceiling = total / 8, res = 0;
  /* A bounded poll for the allocator's effect (no allocation meanwhile). */
  struct timespec tenth = {0, 100 * 1000 * 1000};
  for (int i = 0; i < 600; i++) {
    res = resident_pages();
    if (res <= ceiling) break;
    nanosleep(&tenth, NULL);
  }
  if (res > ceiling)
    fprintf(stderr, "%ld of %ld freed pages still resident after 60 s idle (ceiling %ld)\n", res,
            total, ceiling);
  printf("%d threads freed %d MiB; back to the system while idle: %s\n", NTHREADS,
         NTHREADS * NBLOCKS * (BLOCK >> 10) >> 10, res <= ceiling ? "yes" : "no");
  return res <= ceiling ? 0 : 1;
}
