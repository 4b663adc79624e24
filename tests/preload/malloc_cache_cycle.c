/* Threads that alternate bursts of allocation with waits, and allocate in
 * their key destructors at exit.
 *
 * An allocator may drop a thread's cache of freed objects while the thread
 * waits and make it again later (goshim does for kernel threads that are no
 * M: 1:1 mode, foreign threads). This program runs 12 threads through 40
 * rounds; in each a thread allocates and frees 64 blocks of 16 B to 32 KiB
 * three times (far more than 64 KiB), leaves 8 blocks of its own filled
 * with its pattern and passes 8 more to its neighbour, then waits at a
 * barrier; after it, it checks and frees its own 8 and the 8 its other
 * neighbour passed it (memory another thread allocated), and between rounds
 * it makes 1,500 small allocations (more than an allocator's count before
 * it makes a dropped cache again). At the end every thread sets a pthread
 * key whose destructor allocates and frees again (after a wait on a
 * condition variable that the last thread to arrive signals), and sets the
 * key again three times so that the destructor runs in four rounds (glibc's
 * PTHREAD_DESTRUCTOR_ITERATIONS), 300 small allocations in each of the
 * first three and 1,600 in the last, after every other key's destructor
 * (the allocator's own too) has run for the last time. Run four times in a row in one process.
 * Every block's contents are checked.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NTHREADS 12
#define ROUNDS 40
#define KEEP 8
#define WAVES 4

static pthread_barrier_t bar;
static void *passed[NTHREADS][KEEP];
static size_t passed_size[NTHREADS][KEEP];
static pthread_key_t key;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int at_exit_count, bad;

static unsigned char pat(unsigned id, unsigned r, unsigned i) { return (unsigned char)(id * 31 + r * 7 + i); }

static void fill(void *p, size_t s, unsigned char v) { memset(p, v, s < 512 ? s : 512); }

static int same(const void *p, size_t s, unsigned char v) {
  const unsigned char *c = p;
  size_t n = s < 512 ? s : 512;
  for (size_t i = 0; i < n; i++)
    if (c[i] != v) return 0;
  return 1;
}

static void burst(unsigned id, int n) {
  void *p[64];
  for (int k = 0; k < n; k++) {
    for (int i = 0; i < 64; i++) {
      size_t s = (size_t)16 << (i % 12);
      p[i] = malloc(s);
      CHECK(p[i] != NULL, "malloc %zu", s);
      fill(p[i], s, (unsigned char)(id + i));
    }
    for (int i = 0; i < 64; i++) {
      size_t s = (size_t)16 << (i % 12);
      if (!same(p[i], s, (unsigned char)(id + i))) __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
      free(p[i]);
    }
  }
}

static void smalls(unsigned id, int n) {
  void *p[100];
  for (int k = 0; k < n; k++) {
    int i = k % 100;
    if (k >= 100) {
      if (((unsigned char *)p[i])[0] != (unsigned char)(id + i)) __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
      free(p[i]);
    }
    p[i] = malloc(24 + (size_t)(k % 7) * 8);
    CHECK(p[i] != NULL, "malloc");
    ((unsigned char *)p[i])[0] = (unsigned char)(id + i);
  }
  for (int i = 0; i < 100 && i < n; i++) {
    if (((unsigned char *)p[i])[0] != (unsigned char)(id + i)) __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
    free(p[i]);
  }
}

static void destructor(void *v) {
  unsigned id = (unsigned)((uintptr_t)v & 0xff), round = (unsigned)((uintptr_t)v >> 8);
  if (round == 1) {
    burst(id, 2);
    pthread_mutex_lock(&mu);
    at_exit_count++;
    pthread_cond_broadcast(&cv);
    while (at_exit_count < NTHREADS) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
  }
  smalls(id, round == 4 ? 1600 : 300);
  if (round < 4) CHECK_EQ(pthread_setspecific(key, (void *)(uintptr_t)(id | (round + 1) << 8)), 0);
}

static void *worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg, next = (id + 1) % NTHREADS, prev = (id + NTHREADS - 1) % NTHREADS;
  void *own[KEEP];
  size_t own_size[KEEP];
  for (unsigned r = 0; r < ROUNDS; r++) {
    burst(id, 3);
    for (int i = 0; i < KEEP; i++) {
      own_size[i] = (size_t)32 << (i + r) % 10;
      own[i] = malloc(own_size[i]);
      CHECK(own[i] != NULL, "malloc");
      fill(own[i], own_size[i], pat(id, r, i));
      size_t s = (size_t)48 << (i + r + 3) % 10;
      void *q = malloc(s);
      CHECK(q != NULL, "malloc");
      fill(q, s, pat(next, r, i + 100));
      passed[next][i] = q;
      passed_size[next][i] = s;
    }
    pthread_barrier_wait(&bar); /* every thread has passed its blocks */
    for (int i = 0; i < KEEP; i++) {
      if (!same(own[i], own_size[i], pat(id, r, i))) __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
      free(own[i]);
      if (!same(passed[id][i], passed_size[id][i], pat(id, r, i + 100)))
        __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
      free(passed[id][i]);
    }
    (void)prev;
    smalls(id, 1500);
    pthread_barrier_wait(&bar); /* every thread has taken its blocks */
  }
  CHECK_EQ(pthread_setspecific(key, (void *)(uintptr_t)(id | 1u << 8)), 0);
  return NULL;
}

int main(void) {
  CHECK_EQ(pthread_key_create(&key, destructor), 0);
  for (int w = 0; w < WAVES; w++) {
    pthread_t t[NTHREADS];
    at_exit_count = 0;
    CHECK_EQ(pthread_barrier_init(&bar, NULL, NTHREADS), 0);
    for (int i = 0; i < NTHREADS; i++)
      CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i), 0);
    for (int i = 0; i < NTHREADS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
    CHECK_EQ(pthread_barrier_destroy(&bar), 0);
    CHECK_EQ(at_exit_count, NTHREADS);
  }
  CHECK(bad == 0, "%d blocks lost their contents", bad);
  printf("%d waves of %d threads: %d rounds of bursts and waits, destructors in 4 rounds; contents kept\n",
         WAVES, NTHREADS, ROUNDS);
  return 0;
}
