/* Barrier-phased computation with thousands of threads: in every phase each
 * thread adds to a per-phase counter; after the barrier every thread checks
 * that the whole phase is complete. Exactly one thread per phase gets
 * PTHREAD_BARRIER_SERIAL_THREAD. Between phases the threads also pass a
 * counting semaphore and a spinlock-protected counter. Under goshim all of
 * it runs on GOSHIM_MAXPROCS + 4 kernel threads. */
#include <pthread.h>
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

int main(void) {
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
