/* Two threads hand a token back and forth through a mutex and two
 * condition variables while a third thread computes without pause until
 * they are done. The exchange must go on at a useful rate whatever the
 * number of processors: with one processor the computing thread gets its
 * share and the pair gets theirs, as the kernel's scheduler gives them.
 * EXCHANGES hand-overs fit well within the case's timeout unless each one
 * waits for a whole time slice of the computing thread. Every hand-over
 * is checked (the token alternates). */
#include <pthread.h>
#include <stdatomic.h>
#include "common.h"

#define EXCHANGES 40000

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn[2] = {PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};
static int token; /* whose turn: 0 or 1 */
static long passes;
static atomic_int done;
static volatile unsigned long sink;

static void *player(void *arg) {
  int me = (int)(long)arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (token != me && passes < EXCHANGES) pthread_cond_wait(&turn[me], &mu);
    if (passes >= EXCHANGES) break;
    CHECK_EQ(token, me);
    passes++;
    token = 1 - me;
    pthread_cond_signal(&turn[1 - me]);
  }
  pthread_cond_signal(&turn[1 - me]);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void *spinner(void *arg) {
  (void)arg;
  unsigned long x = 1;
  while (!atomic_load_explicit(&done, memory_order_relaxed))
    for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
  return NULL;
}

int main(void) {
  pthread_t s, p[2];
  CHECK_EQ(pthread_create(&s, NULL, spinner, NULL), 0);
  for (long i = 0; i < 2; i++) CHECK_EQ(pthread_create(&p[i], NULL, player, (void *)i), 0);
  for (int i = 0; i < 2; i++) CHECK_EQ(pthread_join(p[i], NULL), 0);
  atomic_store(&done, 1);
  CHECK_EQ(pthread_join(s, NULL), 0);
  CHECK_EQ(passes, EXCHANGES);
  printf("%d hand-overs beside a computing thread\n", EXCHANGES);
  return 0;
}
