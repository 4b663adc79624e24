/* The shared segment of sync_pshared and its helper. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <semaphore.h>

#define PINGPONGS 2000
#define RW_ROUNDS 2000

struct shared {
  pthread_mutex_t mu;     /* process-shared, error-checking */
  pthread_cond_t cv;      /* process-shared */
  pthread_mutex_t robust; /* process-shared, robust */
  sem_t go;               /* unnamed, process-shared */
  pthread_barrier_t bar;  /* process-shared, 2 */
  pthread_rwlock_t rw;    /* process-shared */
  long rw_a, rw_b;        /* writers keep them equal */
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
  pthread_barrierattr_t ba;
  pthread_barrierattr_init(&ba);
  pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&s->bar, &ba, 2);
  pthread_rwlockattr_t ra;
  pthread_rwlockattr_init(&ra);
  pthread_rwlockattr_setpshared(&ra, PTHREAD_PROCESS_SHARED);
  pthread_rwlock_init(&s->rw, &ra);
  s->rw_a = s->rw_b = 0;
  s->counter = 0;
  s->inside = 0;
  s->turn = 0;
  s->fword = 0;
}

/* Both processes: alternate writes and reads on the shared rwlock, meeting
 * at the shared barrier now and then. */
static inline void rw_and_barrier(struct shared *s, int me) {
  for (int i = 0; i < RW_ROUNDS; i++) {
    if ((i + me) % 4 == 0) {
      pthread_rwlock_wrlock(&s->rw);
      s->rw_a++;
      s->rw_b++;
      pthread_rwlock_unlock(&s->rw);
    } else {
      pthread_rwlock_rdlock(&s->rw);
      if (s->rw_a != s->rw_b) {
        fprintf(stderr, "FAIL: reader saw %ld/%ld\n", s->rw_a, s->rw_b);
        exit(1);
      }
      pthread_rwlock_unlock(&s->rw);
    }
    if (i % 100 == 0) pthread_barrier_wait(&s->bar);
  }
}
