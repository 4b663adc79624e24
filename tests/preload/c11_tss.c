/* C11 thread-specific storage next to pthread keys: values stay apart,
 * tss destructors run when a thread (pthread or C11) ends. */
#include <pthread.h>
#include <stdint.h>
#include <threads.h>
#include "common.h"

static pthread_key_t k1, k2;
static tss_t t1, t2;
static volatile int dtor_t1, dtor_k1;

static void on_t1(void *v) { __atomic_add_fetch(&dtor_t1, (int)(intptr_t)v, __ATOMIC_RELAXED); }
static void on_k1(void *v) { __atomic_add_fetch(&dtor_k1, (int)(intptr_t)v, __ATOMIC_RELAXED); }

static void check_apart(intptr_t base) {
  CHECK_EQ(pthread_setspecific(k1, (void *)(base + 1)), 0);
  CHECK_EQ(tss_set(t1, (void *)(base + 2)), thrd_success);
  CHECK_EQ(pthread_setspecific(k2, (void *)(base + 3)), 0);
  CHECK_EQ(tss_set(t2, (void *)(base + 4)), thrd_success);
  CHECK(pthread_getspecific(k1) == (void *)(base + 1), "k1 %p", pthread_getspecific(k1));
  CHECK(tss_get(t1) == (void *)(base + 2), "t1 %p", tss_get(t1));
  CHECK(pthread_getspecific(k2) == (void *)(base + 3), "k2 %p", pthread_getspecific(k2));
  CHECK(tss_get(t2) == (void *)(base + 4), "t2 %p", tss_get(t2));
}

static void *pthread_body(void *arg) {
  CHECK(tss_get(t1) == NULL && pthread_getspecific(k1) == NULL, "fresh thread sees values");
  check_apart((intptr_t)arg);
  return NULL;
}

static int c11_body(void *arg) {
  check_apart((intptr_t)arg);
  return 7;
}

int main(void) {
  CHECK_EQ(pthread_key_create(&k1, on_k1), 0);
  CHECK_EQ(tss_create(&t1, on_t1), thrd_success);
  CHECK_EQ(pthread_key_create(&k2, NULL), 0);
  CHECK_EQ(tss_create(&t2, NULL), thrd_success);
  CHECK(k1 != k2 && t1 != t2, "keys %u %u, tss %u %u", k1, k2, t1, t2);
  check_apart(100);
  enum { N = 200 };
  pthread_t t[N];
  for (int i = 0; i < N; i++) CHECK_EQ(pthread_create(&t[i], NULL, pthread_body, (void *)(intptr_t)(1000 * (i + 1))), 0);
  for (int i = 0; i < N; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  /* each thread's destructors got base+2 (t1) and base+1 (k1) */
  long want_t1 = 0, want_k1 = 0;
  for (int i = 0; i < N; i++) want_t1 += 1000 * (i + 1) + 2, want_k1 += 1000 * (i + 1) + 1;
  CHECK(dtor_t1 == want_t1 && dtor_k1 == want_k1, "destructors: t1 %d/%ld k1 %d/%ld", dtor_t1,
        want_t1, dtor_k1, want_k1);
  thrd_t c;
  CHECK_EQ(thrd_create(&c, c11_body, (void *)(intptr_t)5000000), thrd_success);
  int res = 0;
  CHECK_EQ(thrd_join(c, &res), thrd_success);
  CHECK_EQ(res, 7);
  CHECK(dtor_t1 == want_t1 + 5000002, "C11 thread's tss destructor: %d", dtor_t1);
  check_apart(100);
  tss_delete(t2);
  CHECK_EQ(pthread_key_delete(k2), 0);
  printf("tss and pthread keys apart; destructors ran\n");
  return 0;
}
