/* The burst shared by dbmem_idle_return and dbmem_idle_return_wait: 32
 * threads each allocate 8 blocks of 256 KiB and write every page; once all
 * blocks exist (a barrier: glibc raises its mapping threshold at the first
 * such free), every thread checks its blocks' contents, frees them and
 * exits. The tests then watch whether the freed pages stay resident. */
#ifndef DBMEM_BURST_H
#define DBMEM_BURST_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

#define NTHREADS 32
#define NBLOCKS 8
#define BLOCK (256 << 10)
#define BURST_PAGES(page) ((long)NTHREADS * NBLOCKS * (BLOCK / (page)))

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

/* Runs the burst; on return every block is freed (blocks[][] keeps the
 * addresses). */
static void burst(void) {
  page = sysconf(_SC_PAGESIZE);
  CHECK(page > 0 && page <= 4096 * 16, "page size");
  pthread_t th[NTHREADS];
  CHECK_EQ(pthread_barrier_init(&all_allocated, NULL, NTHREADS), 0);
  for (int t = 0; t < NTHREADS; t++)
    CHECK_EQ(pthread_create(&th[t], NULL, conn, (void *)(long)t), 0);
  for (int t = 0; t < NTHREADS; t++) CHECK_EQ(pthread_join(th[t], NULL), 0);
}

/* Resident pages of the freed blocks, as present(a) reports each page
 * (1 resident, 0 not, -1 error: returned as is). No allocation. */
static long burst_resident(int (*present)(uintptr_t a, void *ctx), void *ctx) {
  long n = 0;
  for (int t = 0; t < NTHREADS; t++)
    for (int i = 0; i < NBLOCKS; i++) {
      uintptr_t lo = (uintptr_t)blocks[t][i] & ~(uintptr_t)(page - 1);
      uintptr_t hi = ((uintptr_t)blocks[t][i] + BLOCK + page - 1) & ~(uintptr_t)(page - 1);
      for (uintptr_t a = lo; a < hi; a += page) {
        int r = present(a, ctx);
        if (r < 0) return -1;
        n += r;
      }
    }
  return n;
}

#endif
