/* Producer/consumer over a bounded queue (mutex + two condition variables)
 * with thousands of threads: every item produced is consumed exactly once
 * (no lost or duplicated wake-ups), the queue bounds hold, and under goshim
 * all those threads live on GOSHIM_MAXPROCS + 4 kernel threads. Runs the
 * protocol with signal, with broadcast, and with timed waits. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include "common.h"

#define CAP 16

struct queue {
  pthread_mutex_t mu;
  pthread_cond_t not_empty, not_full;
  long items[CAP];
  int head, count;
  long produced_sum, consumed_sum;
  long consumed;
  int max_seen;
  int mode; /* 0 signal, 1 broadcast, 2 timed waits + signal */
};

static struct queue q = {.mu = PTHREAD_MUTEX_INITIALIZER,
                         .not_empty = PTHREAD_COND_INITIALIZER,
                         .not_full = PTHREAD_COND_INITIALIZER};
static int nprod, ncons, per_prod;
static long total;
static pthread_barrier_t alive;
static volatile int kthreads_checked;

static void qwait(pthread_cond_t *c) {
  if (q.mode == 2) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 2 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
    int r = pthread_cond_timedwait(c, &q.mu, &ts);
    CHECK(r == 0 || r == ETIMEDOUT, "timedwait returned %d", r);
  } else {
    CHECK_EQ(pthread_cond_wait(c, &q.mu), 0);
  }
}

static void wake(pthread_cond_t *c) {
  if (q.mode == 1)
    pthread_cond_broadcast(c);
  else
    pthread_cond_signal(c);
}

/* All producers and consumers meet here; one of them checks the count of
 * kernel threads while they are all alive. */
static void all_alive(void) {
  int r = pthread_barrier_wait(&alive);
  if (r == PTHREAD_BARRIER_SERIAL_THREAD) {
    check_kernel_threads("all producers and consumers alive");
    kthreads_checked = 1;
  }
}

static void *producer(void *arg) {
  long id = (long)arg;
  all_alive();
  for (int i = 0; i < per_prod; i++) {
    long v = id * 1000003 + i + 1;
    pthread_mutex_lock(&q.mu);
    while (q.count == CAP) qwait(&q.not_full);
    q.items[(q.head + q.count) % CAP] = v;
    q.count++;
    if (q.count > q.max_seen) q.max_seen = q.count;
    q.produced_sum += v;
    wake(&q.not_empty);
    pthread_mutex_unlock(&q.mu);
  }
  return NULL;
}

static void *consumer(void *arg) {
  long mine = 0;
  all_alive();
  for (;;) {
    pthread_mutex_lock(&q.mu);
    while (q.count == 0 && q.consumed < total) qwait(&q.not_empty);
    if (q.count == 0) { /* everything consumed: let the others see it too */
      pthread_cond_broadcast(&q.not_empty);
      pthread_mutex_unlock(&q.mu);
      break;
    }
    long v = q.items[q.head];
    q.head = (q.head + 1) % CAP;
    q.count--;
    q.consumed++;
    q.consumed_sum += v;
    mine++;
    if (q.consumed == total) pthread_cond_broadcast(&q.not_empty);
    wake(&q.not_full);
    pthread_mutex_unlock(&q.mu);
  }
  return (void *)mine;
}

static void run(int mode) {
  q.mode = mode;
  q.head = q.count = 0;
  q.produced_sum = q.consumed_sum = q.consumed = 0;
  q.max_seen = 0;
  total = (long)nprod * per_prod;
  pthread_barrier_init(&alive, NULL, nprod + ncons);
  pthread_t *p = malloc(sizeof(pthread_t) * nprod), *c = malloc(sizeof(pthread_t) * ncons);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 64 * 1024);
  for (int i = 0; i < ncons; i++) CHECK_EQ(pthread_create(&c[i], &a, consumer, NULL), 0);
  for (int i = 0; i < nprod; i++) CHECK_EQ(pthread_create(&p[i], &a, producer, (void *)(long)i), 0);
  for (int i = 0; i < nprod; i++) pthread_join(p[i], NULL);
  long got = 0;
  for (int i = 0; i < ncons; i++) {
    void *r;
    pthread_join(c[i], &r);
    got += (long)r;
  }
  CHECK_EQ(got, total);
  CHECK_EQ(q.consumed, total);
  CHECK_EQ(q.produced_sum, q.consumed_sum);
  CHECK(q.max_seen <= CAP, "queue overflowed: %d", q.max_seen);
  CHECK_EQ(q.count, 0);
  CHECK(kthreads_checked, "kernel threads were checked");
  kthreads_checked = 0;
  pthread_barrier_destroy(&alive);
  pthread_attr_destroy(&a);
  free(p);
  free(c);
  printf("mode %d: %ld items through %d producers and %d consumers\n", mode, total, nprod, ncons);
}

int main(void) {
  nprod = env_int("NPROD", 1000);
  ncons = env_int("NCONS", 1000);
  per_prod = env_int("PER_PROD", 50);
  run(0);
  run(1);
  run(2);
  return 0;
}
