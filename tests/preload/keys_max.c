/* All PTHREAD_KEYS_MAX pthread keys belong to the program: every one can
 * be created (the next fails with EAGAIN), holds a separate value per
 * thread, and has its destructor run at each thread's exit; a deleted key
 * can be created again. Threads allocate while they hold the values (the
 * allocator's own per-thread state must not be disturbed). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include "common.h"

#define THREADS 8

static pthread_key_t keys[PTHREAD_KEYS_MAX];
static long destroyed[THREADS + 1];

static void destr(void *v) {
  uintptr_t x = (uintptr_t)v;
  long t = (long)(x >> 16);
  CHECK(t >= 1 && t <= THREADS, "destructor value %#lx", (unsigned long)x);
  __atomic_add_fetch(&destroyed[t], 1, __ATOMIC_RELAXED);
}

static void *worker(void *arg) {
  long t = (long)(intptr_t)arg;
  for (int i = 0; i < PTHREAD_KEYS_MAX; i++)
    CHECK(pthread_getspecific(keys[i]) == NULL, "thread %ld key %d starts non-NULL", t, i);
  for (int i = 0; i < PTHREAD_KEYS_MAX; i++)
    CHECK_EQ(pthread_setspecific(keys[i], (void *)(uintptr_t)((t << 16) | (uintptr_t)i)), 0);
  void *blocks[256];
  for (int round = 0; round < 20; round++) {
    for (int j = 0; j < 256; j++) {
      blocks[j] = malloc(16 + (size_t)j * 8);
      CHECK(blocks[j] != NULL, "malloc");
      memset(blocks[j], (int)t, 16);
    }
    for (int j = 0; j < 256; j++) free(blocks[j]);
    sched_yield();
  }
  for (int i = 0; i < PTHREAD_KEYS_MAX; i++)
    CHECK(pthread_getspecific(keys[i]) == (void *)(uintptr_t)((t << 16) | (uintptr_t)i),
          "thread %ld key %d lost its value", t, i);
  return NULL;
}

int main(void) {
  for (int i = 0; i < PTHREAD_KEYS_MAX; i++) {
    int r = pthread_key_create(&keys[i], destr);
    CHECK(r == 0, "pthread_key_create number %d: %d", i + 1, r);
  }
  pthread_key_t extra;
  CHECK_EQ(pthread_key_create(&extra, NULL), EAGAIN);
  printf("created %d keys, then EAGAIN\n", PTHREAD_KEYS_MAX);

  /* main's own values (never destroyed: main does not exit a thread). */
  for (int i = 0; i < PTHREAD_KEYS_MAX; i++)
    CHECK_EQ(pthread_setspecific(keys[i], (void *)(uintptr_t)(0x7f0000 | i)), 0);

  pthread_t th[THREADS];
  for (long t = 1; t <= THREADS; t++)
    CHECK_EQ(pthread_create(&th[t - 1], NULL, worker, (void *)(intptr_t)t), 0);
  for (int t = 0; t < THREADS; t++) CHECK_EQ(pthread_join(th[t], NULL), 0);
  for (int t = 1; t <= THREADS; t++) CHECK_EQ(destroyed[t], PTHREAD_KEYS_MAX);
  for (int i = 0; i < PTHREAD_KEYS_MAX; i++)
    CHECK(pthread_getspecific(keys[i]) == (void *)(uintptr_t)(0x7f0000 | i), "main key %d", i);
  printf("values per thread, destructors run: ok\n");

  /* A deleted key can be created again, with no value anywhere. */
  for (int i = 0; i < PTHREAD_KEYS_MAX; i += 97) {
    CHECK_EQ(pthread_key_delete(keys[i]), 0);
    CHECK_EQ(pthread_key_create(&keys[i], destr), 0);
    CHECK(pthread_getspecific(keys[i]) == NULL, "recreated key %d has a value", i);
  }
  CHECK_EQ(pthread_key_create(&extra, NULL), EAGAIN);
  for (int i = 0; i < PTHREAD_KEYS_MAX; i++) CHECK_EQ(pthread_key_delete(keys[i]), 0);
  for (int i = 0; i < PTHREAD_KEYS_MAX; i++) CHECK_EQ(pthread_key_create(&keys[i], NULL), 0);
  CHECK_EQ(pthread_key_create(&extra, NULL), EAGAIN);
  printf("delete and create again: ok\n");
  return 0;
}
