/* Readers/writers with thousands of threads on each rwlock kind: readers
 * never see a writer inside (nor a torn pair of values), writers exclude
 * everyone, every increment lands, and under goshim everything runs on
 * GOSHIM_MAXPROCS + 4 kernel threads. Then glibc's preference rules:
 * PREFER_WRITER_NONRECURSIVE_NP holds new readers back while a writer
 * waits, the default kind lets them in. */
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static pthread_rwlock_t rw;
static long a, b; /* writers keep a == b */
static int writers_in, readers_in;
static int nthreads, rounds;
enum { kYieldRounds = 10 }; /* rounds in which a holder yields (see worker) */
static pthread_barrier_t alive;
static long reads_done;

static void *worker(void *arg) {
  long id = (long)arg;
  int r = pthread_barrier_wait(&alive);
  if (r == PTHREAD_BARRIER_SERIAL_THREAD) check_kernel_threads("all readers and writers alive");
  for (int i = 0; i < rounds; i++) {
    if ((id + i) % 8 == 0) {
      CHECK_EQ(pthread_rwlock_wrlock(&rw), 0);
      int w = __atomic_add_fetch(&writers_in, 1, __ATOMIC_SEQ_CST);
      CHECK_EQ(w, 1);
      CHECK_EQ(__atomic_load_n(&readers_in, __ATOMIC_SEQ_CST), 0);
      a++;
      /* Let others pile up behind the writer, in the first rounds (while
       * every thread is still starting, the most contended part): natively
       * each yield while holding the lock waits for every runnable task on
       * this CPU, so yielding in all rounds made the native run take minutes
       * on a loaded machine (180 s timeout under stress-ng and a parallel
       * build; 33 s under stress-ng alone). */
      if (i < kYieldRounds && i % 3 == 0) sched_yield();
      b++;
      __atomic_sub_fetch(&writers_in, 1, __ATOMIC_SEQ_CST);
      CHECK_EQ(pthread_rwlock_unlock(&rw), 0);
    } else {
      CHECK_EQ(pthread_rwlock_rdlock(&rw), 0);
      __atomic_add_fetch(&readers_in, 1, __ATOMIC_SEQ_CST);
      CHECK_EQ(__atomic_load_n(&writers_in, __ATOMIC_SEQ_CST), 0);
      long x = a, y = b;
      CHECK(x == y, "reader saw a=%ld b=%ld", x, y);
      if (i < kYieldRounds && i % 5 == 0) sched_yield();
      __atomic_sub_fetch(&readers_in, 1, __ATOMIC_SEQ_CST);
      __atomic_add_fetch(&reads_done, 1, __ATOMIC_RELAXED);
      CHECK_EQ(pthread_rwlock_unlock(&rw), 0);
    }
  }
  return NULL;
}

static void stress(int kind) {
  pthread_rwlockattr_t at;
  pthread_rwlockattr_init(&at);
  CHECK_EQ(pthread_rwlockattr_setkind_np(&at, kind), 0);
  CHECK_EQ(pthread_rwlock_init(&rw, &at), 0);
  a = b = 0;
  reads_done = 0;
  pthread_barrier_init(&alive, NULL, nthreads);
  pthread_t *t = malloc(sizeof(pthread_t) * nthreads);
  pthread_attr_t sa;
  pthread_attr_init(&sa);
  pthread_attr_setstacksize(&sa, 64 * 1024);
  for (long i = 0; i < nthreads; i++) CHECK_EQ(pthread_create(&t[i], &sa, worker, (void *)i), 0);
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  long writes = 0;
  for (long id = 0; id < nthreads; id++)
    for (int i = 0; i < rounds; i++) writes += (id + i) % 8 == 0;
  CHECK_EQ(a, writes);
  CHECK_EQ(b, writes);
  CHECK_EQ(reads_done, (long)nthreads * rounds - writes);
  pthread_barrier_destroy(&alive);
  pthread_rwlock_destroy(&rw);
  free(t);
  printf("kind %d: %ld writes, %ld reads by %d threads\n", kind, writes, reads_done, nthreads);
}

/* Preference: a reader holds the lock, a writer waits, a new reader comes. */
static pthread_rwlock_t pr;
static volatile int writer_waiting_started, second_reader_done; /* the writer's tid */
static void *pref_writer(void *arg) {
  writer_waiting_started = self_tid();
  CHECK_EQ(pthread_rwlock_wrlock(&pr), 0);
  CHECK_EQ(pthread_rwlock_unlock(&pr), 0);
  return arg;
}

static void preference(int kind, int expect_reader_blocked) {
  pthread_rwlockattr_t at;
  pthread_rwlockattr_init(&at);
  pthread_rwlockattr_setkind_np(&at, kind);
  pthread_rwlock_init(&pr, &at);
  CHECK_EQ(pthread_rwlock_rdlock(&pr), 0);
  pthread_t w;
  writer_waiting_started = 0;
  pthread_create(&w, NULL, pref_writer, NULL);
  while (!writer_waiting_started) sched_yield();
  int r;
  if (expect_reader_blocked) {
    /* Until the writer is inside wrlock a new reader gets in; from then on
     * it must not (nothing else shows that the writer waits). The reader
     * lets go at once, so the writer can only wait, never get the lock. */
    struct timespec t0, t1;
    CHECK_EQ(clock_gettime(CLOCK_MONOTONIC, &t0), 0);
    while ((r = pthread_rwlock_tryrdlock(&pr)) == 0) {
      CHECK_EQ(pthread_rwlock_unlock(&pr), 0);
      CHECK_EQ(clock_gettime(CLOCK_MONOTONIC, &t1), 0);
      CHECK(t1.tv_sec - t0.tv_sec < 10, "new readers still get in 10 s after the writer came");
      sched_yield();
    }
    CHECK_EQ(r, EBUSY);
  } else {
    /* The writer sleeps in wrlock: a new reader gets in all the same. */
    wait_tid_asleep(writer_waiting_started, NULL);
    r = pthread_rwlock_tryrdlock(&pr);
    CHECK_EQ(r, 0);
    CHECK_EQ(pthread_rwlock_unlock(&pr), 0);
  }
  CHECK_EQ(pthread_rwlock_unlock(&pr), 0);
  pthread_join(w, NULL);
  pthread_rwlock_destroy(&pr);
  printf("kind %d: a new reader %s while a writer waits\n", kind,
         expect_reader_blocked ? "waits" : "gets in");
}

int main(void) {
  nthreads = env_int("NTHREADS", 2000);
  rounds = env_int("ROUNDS", 40);
  stress(PTHREAD_RWLOCK_PREFER_READER_NP);
  stress(PTHREAD_RWLOCK_PREFER_WRITER_NP);
  stress(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  preference(PTHREAD_RWLOCK_PREFER_READER_NP, 0);
  preference(PTHREAD_RWLOCK_PREFER_WRITER_NP, 0);
  preference(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP, 1);
  return 0;
}
