/* pthread keys with destructors (including a destructor that stores a new
 * value, which needs a second round), and pthread_once with concurrent
 * callers that must all see the routine finished. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include "common.h"

#define THREADS 100

static pthread_key_t key1, key2;
static int destr1, destr2, rounds2;

static void d1(void *v) {
  __atomic_add_fetch(&destr1, (int)(intptr_t)v, __ATOMIC_RELAXED);
}

static void d2(void *v) {
  __atomic_add_fetch(&destr2, 1, __ATOMIC_RELAXED);
  if ((intptr_t)v == 1) {
    __atomic_add_fetch(&rounds2, 1, __ATOMIC_RELAXED);
    pthread_setspecific(key2, (void *)2); /* runs again in the next round */
  }
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static volatile int once_done, once_runs;

static void init_routine(void) {
  once_runs++;
  for (int i = 0; i < 50; i++) sched_yield(); /* let the others pile up */
  once_done = 1;
}

static void *worker(void *arg) {
  intptr_t id = (intptr_t)arg;
  CHECK(pthread_getspecific(key1) == NULL, "fresh thread sees a value");
  CHECK_EQ(pthread_setspecific(key1, (void *)(id + 1)), 0);
  CHECK_EQ(pthread_setspecific(key2, (void *)1), 0);
  sched_yield();
  CHECK((intptr_t)pthread_getspecific(key1) == id + 1, "value changed");
  CHECK_EQ(pthread_once(&once, init_routine), 0);
  CHECK(once_done, "pthread_once returned before the routine finished");
  return NULL;
}

int main(void) {
  CHECK_EQ(pthread_key_create(&key1, d1), 0);
  CHECK_EQ(pthread_key_create(&key2, d2), 0);
  pthread_t t[THREADS];
  for (intptr_t i = 0; i < THREADS; i++) CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)i), 0);
  for (int i = 0; i < THREADS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  CHECK_EQ(destr1, THREADS * (THREADS + 1) / 2);
  CHECK_EQ(destr2, 2 * THREADS);
  CHECK_EQ(rounds2, THREADS);
  CHECK_EQ(once_runs, 1);
  /* deleted keys: their values are not destroyed, setspecific fails */
  pthread_key_t k3;
  CHECK_EQ(pthread_key_create(&k3, d1), 0);
  CHECK_EQ(pthread_key_delete(k3), 0);
  CHECK_EQ(pthread_key_delete(k3), 22 /* EINVAL */);
  CHECK_EQ(pthread_setspecific(k3, (void *)1), 22);
  /* many keys: the second level of the TSD array */
  pthread_key_t many[200];
  for (int i = 0; i < 200; i++) CHECK_EQ(pthread_key_create(&many[i], NULL), 0);
  for (int i = 0; i < 200; i++) CHECK_EQ(pthread_setspecific(many[i], (void *)(intptr_t)(i + 7)), 0);
  for (int i = 0; i < 200; i++) CHECK((intptr_t)pthread_getspecific(many[i]) == i + 7, "key %d", i);
  printf("keys: %d destructor calls, %d second rounds; once ran %d time\n", destr1 + destr2,
         rounds2, once_runs);
  return 0;
}
