/* pthread_exit from main: detached threads outlive main; the process ends
 * (status 0, atexit handlers run) when the last thread ends. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile int main_gone;

static void bye(void) {
  printf("atexit handler ran\n");
  fflush(stdout);
}

static void *late(void *arg) {
  long id = (long)arg;
  while (!main_gone) sched_yield();
  for (int i = 0; i < 100; i++) sched_yield();
  printf("detached thread %ld finished after main\n", id);
  fflush(stdout);
  return NULL;
}

static void *flagger(void *arg) {
  pthread_t main_thread = (pthread_t)arg;
  /* joining main works: it ends through pthread_exit */
  void *r = (void *)1;
  int e = pthread_join(main_thread, &r);
  printf("joined main: %d %p\n", e, r);
  fflush(stdout);
  main_gone = 1;
  return NULL;
}

int main(void) {
  atexit(bye);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  for (long i = 0; i < 3; i++) {
    if (pthread_create(&t, &a, late, (void *)i)) return 1;
    /* serialize their prints so the output is deterministic */
  }
  if (pthread_create(&t, &a, flagger, (void *)pthread_self())) return 1;
  printf("main calls pthread_exit\n");
  fflush(stdout);
  pthread_exit((void *)42);
}
