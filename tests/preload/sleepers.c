/* 10,000 threads each sleep 100 ms twice, through every sleep call
 * (usleep, nanosleep, clock_nanosleep relative and absolute on
 * CLOCK_MONOTONIC and CLOCK_REALTIME, sleep(0)); every one wakes, none
 * earlier than asked (measured on the clock it slept on). The threads
 * first wait at a gate until all have started, so all are alive when the
 * kernel threads are counted; the sleeps are what is tested, nothing is
 * ordered by one.
 *
 *   sleepers [threads=10000] [ms=100] */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static int nthreads, ms;
static atomic_int woke, short_sleeps;
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int arrived, open_gate;

static long long now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void one_sleep(int id, int round) {
  long long want = ms * 1000000LL;
  int kind = (id + round) % 5;
  clockid_t clk = kind == 4 ? CLOCK_REALTIME : CLOCK_MONOTONIC;
  long long t0 = now_ns(clk);
  struct timespec req = {want / 1000000000, want % 1000000000};
  int r = 0;
  switch (kind) {
    case 0:
      r = usleep((useconds_t)(want / 1000));
      break;
    case 1:
      r = nanosleep(&req, NULL);
      break;
    case 2:
      r = clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL);
      break;
    case 3:
    case 4: {
      long long until = t0 + want;
      struct timespec abs = {until / 1000000000, until % 1000000000};
      r = clock_nanosleep(clk, TIMER_ABSTIME, &abs, NULL);
      break;
    }
  }
  CHECK(r == 0, "sleep kind %d returned %d (errno %d)", kind, r, errno);
  long long slept = now_ns(clk) - t0;
  if (slept < want) atomic_fetch_add(&short_sleeps, 1);
}

static void *sleeper(void *arg) {
  int id = (int)(long)arg;
  CHECK(sleep(0) == 0, "sleep(0)");
  pthread_mutex_lock(&gate_mu);
  if (++arrived == nthreads) pthread_cond_broadcast(&gate_cv);
  while (!open_gate) pthread_cond_wait(&gate_cv, &gate_mu);
  pthread_mutex_unlock(&gate_mu);
  one_sleep(id, 0);
  one_sleep(id, 1);
  atomic_fetch_add(&woke, 1);
  return NULL;
}

int main(int argc, char **argv) {
  nthreads = argc > 1 ? atoi(argv[1]) : 10000;
  ms = argc > 2 ? atoi(argv[2]) : 100;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t *t = malloc(sizeof(pthread_t) * nthreads);
  for (int i = 0; i < nthreads; i++)
    CHECK(pthread_create(&t[i], &attr, sleeper, (void *)(long)i) == 0, "create %d", i);
  /* All have started and wait at the gate: they are all alive. */
  pthread_mutex_lock(&gate_mu);
  while (arrived < nthreads) pthread_cond_wait(&gate_cv, &gate_mu);
  check_kernel_threads("all waiting at the gate");
  open_gate = 1;
  pthread_cond_broadcast(&gate_cv);
  pthread_mutex_unlock(&gate_mu);
  /* They sleep now (an upper bound holds whenever it is checked). */
  check_kernel_threads("all sleeping");
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  CHECK(atomic_load(&woke) == nthreads, "woke %d of %d", atomic_load(&woke), nthreads);
  CHECK(atomic_load(&short_sleeps) == 0, "%d sleeps ended early", atomic_load(&short_sleeps));
  printf("%d threads slept %d ms twice\n", nthreads, ms);
  return 0;
}
