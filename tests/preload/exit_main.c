/* pthread_exit from main: detached threads outlive main; main can be
 * joined (its value is pthread_exit's); the process ends (status 0,
 * atexit handlers run) only when the last thread ends. The output order is
 * fixed by handshakes, so it must be identical natively and under goshim;
 * the atexit handler checks that every thread finished before it. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { LATE = 3 };
static atomic_int main_gone, turn, finished;

static void bye(void) {
  int f = atomic_load(&finished);
  printf("atexit handler ran after %d of %d detached threads\n", f, LATE);
  fflush(stdout);
  if (f != LATE) _exit(3);
}

static void *late(void *arg) {
  int id = (int)(long)arg;
  while (!atomic_load(&main_gone)) sched_yield();
  while (atomic_load(&turn) != id) sched_yield();  /* one at a time, in order */
  printf("detached thread %d finished after main\n", id);
  fflush(stdout);
  atomic_fetch_add(&finished, 1);
  atomic_store(&turn, id + 1);
  return NULL;
}

static void *flagger(void *arg) {
  pthread_t main_thread = (pthread_t)arg;
  /* joining main works: it ends through pthread_exit */
  void *r = (void *)1;
  int e = pthread_join(main_thread, &r);
  printf("joined main: %d %ld\n", e, (long)r);
  fflush(stdout);
  if (e != 0 || r != (void *)42) _exit(4);
  atomic_store(&main_gone, 1);
  return NULL;
}

int main(void) {
  atexit(bye);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  for (long i = 0; i < LATE; i++)
    if (pthread_create(&t, &a, late, (void *)i)) return 1;
  if (pthread_create(&t, &a, flagger, (void *)pthread_self())) return 1;
  printf("main calls pthread_exit\n");
  fflush(stdout);
  pthread_exit((void *)42);
}
