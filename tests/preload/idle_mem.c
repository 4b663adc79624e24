/* Many idle threads: NTHREADS threads (default 100,000; the runner uses
 * fewer natively, where each is a kernel thread and pid_max is 32,768)
 * check in and then block: a third on a condition variable, a third in
 * read() on a pipe, a third in nanosleep (re-checking a flag between
 * sleeps). Once all have checked in, main releases them (broadcast, the
 * pipe's write end closed, the flag set), each answers by counting itself,
 * and main joins them all.
 *
 * Memory: when the process carried all its threads on a few kernel threads
 * (at most NTHREADS / 100 kernel threads: a thread's memory is then all in
 * the process's resident set), the resident memory grown between before
 * the first pthread_create and the moment all threads had checked in must
 * stay under MAX_BYTES_PER_THREAD per thread (MAX_BYTES_PER_THREAD_ENV
 * overrides it). With one kernel thread per thread the kernel's own memory
 * (its stacks, its task structures) is not in the resident set and the
 * check does not apply; MAX_KERNEL_THREADS (set by the runner when it
 * expects few kernel threads) makes that case a failure instead.
 * The output is the same either way. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define MAX_BYTES_PER_THREAD 10240

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t checked_in_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t release_cv = PTHREAD_COND_INITIALIZER;
static int checked_in, released;
static atomic_int release_flag, answered;
static int pfd[2];

static long status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t n = strlen(key);
  CHECK(f != NULL, "cannot open /proc/self/status");
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0) v = atol(line + n);
  fclose(f);
  CHECK(v >= 0, "no %s in /proc/self/status", key);
  return v;
}

static void check_in(void) {
  pthread_mutex_lock(&mu);
  checked_in++;
  pthread_cond_signal(&checked_in_cv);
  pthread_mutex_unlock(&mu);
}

static void *idle(void *arg) {
  long kind = (long)arg % 3;
  if (kind == 0) {
    pthread_mutex_lock(&mu);
    checked_in++;
    pthread_cond_signal(&checked_in_cv);
    while (!released) pthread_cond_wait(&release_cv, &mu);
    pthread_mutex_unlock(&mu);
  } else if (kind == 1) {
    char c;
    check_in();
    ssize_t r;
    do r = read(pfd[0], &c, 1);
    while (r < 0 && errno == EINTR);
    CHECK(r == 0, "read: %zd (EOF expected once the write end is closed)", r);
  } else {
    struct timespec ts = {0, 500 * 1000 * 1000};
    check_in();
    while (!atomic_load(&release_flag)) CHECK(nanosleep(&ts, NULL) == 0, "nanosleep failed");
  }
  atomic_fetch_add(&answered, 1);
  return NULL;
}

int main(void) {
  int n = env_int("NTHREADS", 100000);
  long ceiling = env_int("MAX_BYTES_PER_THREAD_ENV", MAX_BYTES_PER_THREAD);
  CHECK(pipe(pfd) == 0, "pipe");
  pthread_t *t = calloc(n, sizeof *t);
  CHECK(t != NULL, "calloc");
  memset(t, 1, n * sizeof *t); /* resident before the first measurement */

  long before = status_kb("VmRSS:");
  for (int i = 0; i < n; i++) {
    int err = pthread_create(&t[i], NULL, idle, (void *)(long)i);
    CHECK(err == 0, "pthread_create %d of %d: %s", i, n, strerror(err));
  }
  pthread_mutex_lock(&mu);
  while (checked_in < n) pthread_cond_wait(&checked_in_cv, &mu);
  pthread_mutex_unlock(&mu);
  long after = status_kb("VmRSS:");
  int kt = check_kernel_threads("all threads idle");

  if (kt <= n / 100) {
    long per = (after - before) * 1024 / n;
    if (getenv("IDLE_MEM_VERBOSE"))
      fprintf(stderr, "%ld bytes resident per idle thread (%d threads, %d kernel threads)\n", per,
              n, kt);
    CHECK(per <= ceiling, "%ld bytes resident per idle thread (%d threads), at most %ld expected",
          per, n, ceiling);
  }

  atomic_store(&release_flag, 1);
  pthread_mutex_lock(&mu);
  released = 1;
  pthread_cond_broadcast(&release_cv);
  pthread_mutex_unlock(&mu);
  CHECK(close(pfd[1]) == 0, "close");
  for (int i = 0; i < n; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  CHECK_EQ(atomic_load(&answered), n);
  printf("all idle threads created, checked in and answered\n");
  return 0;
}
