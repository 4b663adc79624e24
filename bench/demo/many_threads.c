/* Thread-per-request past the kernel's thread limit: N request threads are
 * alive at once, each waiting on its "backend" — half on a condition
 * variable the dispatcher signals once every request is in flight, half on
 * a timer (nanosleep) — as a blocking server would hold them.
 *
 *   many_threads N [sleep_ms]
 *
 * Prints "RESULT reached=R of=N peak_live=L kernel_threads=K ..." and exits
 * 0 when all N threads were created and finished; if pthread_create fails it
 * stops there, reports the error and exits 1. Knows nothing of goshim. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t backend = PTHREAD_COND_INITIALIZER;
static pthread_cond_t all_in = PTHREAD_COND_INITIALIZER;
static int replied, alive, target;
static atomic_long done, live, peak_live;
static int sleep_ms = 3000;

static void *request(void *arg) {
  long i = (long)arg;
  long l = atomic_fetch_add(&live, 1) + 1, p = atomic_load(&peak_live);
  while (l > p && !atomic_compare_exchange_weak(&peak_live, &p, l)) {
  }
  pthread_mutex_lock(&mu);
  if (++alive == target) pthread_cond_signal(&all_in);
  if (i % 2 == 0) {
    while (!replied) pthread_cond_wait(&backend, &mu);
    pthread_mutex_unlock(&mu);
  } else {
    pthread_mutex_unlock(&mu);
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  atomic_fetch_add(&done, 1);
  atomic_fetch_sub(&live, 1);
  return NULL;
}

static int kernel_threads(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
  if (f) fclose(f);
  return n;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100000;
  if (argc > 2) sleep_ms = atoi(argv[2]);
  pthread_t *t = calloc(n, sizeof *t);
  double t0 = now_s();
  int created = 0, err = 0;
  target = n;
  for (; created < n; created++) {
    err = pthread_create(&t[created], NULL, request, (void *)(long)created);
    if (err != 0) break;
  }
  pthread_mutex_lock(&mu);
  if (created < n) target = created;
  while (alive < target) pthread_cond_wait(&all_in, &mu);
  int kt = kernel_threads();
  double t_alive = now_s() - t0;
  replied = 1;
  pthread_cond_broadcast(&backend);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < created; i++) pthread_join(t[i], NULL);
  printf("RESULT reached=%d of=%d peak_live=%ld kernel_threads=%d all_alive_s=%.2f total_s=%.2f "
         "finished=%ld error=%s\n",
         created, n, (long)atomic_load(&peak_live), kt, t_alive, now_s() - t0,
         (long)atomic_load(&done), err ? strerrorname_np(err) : "none");
  return created == n && atomic_load(&done) == n ? 0 : 1;
}
