/* The shared segment of sync_pshared and its helper. */
#include <pthread.h>
#include <semaphore.h>

#define PINGPONGS 2000

struct shared {
  pthread_mutex_t mu;     /* process-shared, error-checking */
  pthread_cond_t cv;      /* process-shared */
  pthread_mutex_t robust; /* process-shared, robust */
  sem_t go;               /* unnamed, process-shared */
  long counter;
  int inside;
  int turn;
  int fword;
  int helper_iters;
};

static inline void init_shared(struct shared *s) {
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_init(&s->mu, &ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_NORMAL);
  pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&s->robust, &ma);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
  pthread_cond_init(&s->cv, &ca);
  sem_init(&s->go, 1, 0);
  s->counter = 0;
  s->inside = 0;
  s->turn = 0;
  s->fword = 0;
}
