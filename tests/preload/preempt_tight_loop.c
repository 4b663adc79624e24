/* A thread spinning in a loop without any call must not keep the others
 * (here: main, which alone can end the loop) from running. */
#include <pthread.h>
#include <sched.h>
#include "common.h"

static volatile int started, flag;

static void *spin(void *arg) {
  started = 1;
  while (!flag) {
  }
  return arg;
}

int main(void) {
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, spin, NULL), 0);
  while (!started) sched_yield(); /* let it start: it then never yields */
  flag = 1;                       /* reached only if the spinner was preempted */
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("the tight loop was preempted\n");
  return 0;
}
