/* Barrier-phased computation with thousands of threads: in every phase each
 * thread adds to a per-phase counter; after the barrier every thread checks
 * that the whole phase is complete. Exactly one thread per phase gets
 * PTHREAD_BARRIER_SERIAL_THREAD. Between phases the threads also pass a
 * counting semaphore and a spinlock-protected counter. Under goshim all of
 * it runs on GOSHIM_MAXPROCS + 4 kernel threads. */
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include "common.h"

#define PHASES 30

static pthread_barrier_t bar;
static pthread_spinlock_t spin;
static sem_t tokens;
static long phase_sum[PHASES];
static int serials[PHASES];
static long spin_counter;
static int nthreads;

static void *worker(void *arg) {
  long id = (long)arg;
  for (int p = 0; p < PHASES; p++) {
    __atomic_add_fetch(&phase_sum[p], id + 1, __ATOMIC_RELAXED);
    int r = pthread_barrier_wait(&bar);
    CHECK(r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD, "barrier_wait returned %d", r);
    if (r == PTHREAD_BARRIER_SERIAL_THREAD) {
      __atomic_add_fetch(&serials[p], 1, __ATOMIC_RELAXED);
      if (p == 0) check_kernel_threads("all threads at the barrier");
    }
    long want = (long)nthreads * (nthreads + 1) / 2;
    CHECK(__atomic_load_n(&phase_sum[p], __ATOMIC_RELAXED) == want, "phase %d incomplete", p);
    /* at most 8 threads at a time past the semaphore */
    CHECK_EQ(sem_wait(&tokens), 0);
    pthread_spin_lock(&spin);
    spin_counter++;
    pthread_spin_unlock(&spin);
    CHECK_EQ(sem_post(&tokens), 0);
  }
  return NULL;
}

/* A spinlock holder that gives up the processor while holding it: on a
 * single P the spinning threads must yield in turn, or it never runs again. */
static pthread_spinlock_t held;
static volatile int holder_in, spinners_done;
static void *spin_holder(void *arg) {
  pthread_spin_lock(&held);
  holder_in = 1;
  for (int i = 0; i < 20; i++) sched_yield(); /* the spinners run meanwhile */
  pthread_spin_unlock(&held);
  return arg;
}
static void *spinner(void *arg) {
  while (!holder_in) sched_yield();
  pthread_spin_lock(&held);
  __atomic_add_fetch(&spinners_done, 1, __ATOMIC_SEQ_CST);
  pthread_spin_unlock(&held);
  return arg;
}

static void spin_with_yielding_holder(void) {
  pthread_spin_init(&held, PTHREAD_PROCESS_PRIVATE);
  pthread_t h, s[8];
  pthread_create(&h, NULL, spin_holder, NULL);
  for (int i = 0; i < 8; i++) pthread_create(&s[i], NULL, spinner, NULL);
  pthread_join(h, NULL);
  for (int i = 0; i < 8; i++) pthread_join(s[i], NULL);
  CHECK_EQ(spinners_done, 8);
  printf("spinlock holder that yields: the spinners let it run\n");
}

int main(void) {
  spin_with_yielding_holder();
  nthreads = env_int("NTHREADS", 3000);
  CHECK_EQ(pthread_barrier_init(&bar, NULL, nthreads), 0);
  CHECK_EQ(pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE), 0);
  CHECK_EQ(sem_init(&tokens, 0, 8), 0);
  pthread_t *t = malloc(sizeof(pthread_t) * nthreads);
  pthread_attr_t sa;
  pthread_attr_init(&sa);
  pthread_attr_setstacksize(&sa, 64 * 1024);
  for (long i = 0; i < nthreads; i++) CHECK_EQ(pthread_create(&t[i], &sa, worker, (void *)i), 0);
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  for (int p = 0; p < PHASES; p++) CHECK_EQ(serials[p], 1);
  CHECK_EQ(spin_counter, (long)nthreads * PHASES);
  int v;
  sem_getvalue(&tokens, &v);
  CHECK_EQ(v, 8);
  CHECK_EQ(pthread_barrier_destroy(&bar), 0);
  printf("%d threads through %d phases\n", nthreads, PHASES);
  return 0;
}
