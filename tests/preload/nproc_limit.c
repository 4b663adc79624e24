/* A process that may not create another kernel thread (RLIMIT_NPROC at its
 * current count, after dropping root) starts 200 threads that compute,
 * lock, sleep and make blocking calls. Natively pthread_create fails with
 * EAGAIN; under goshim the threads are goroutines on the kernel threads
 * the process already has, and the blocking calls, which would hand the
 * processor to a new kernel thread, run with the ones it has. Either way
 * nothing crashes and every created thread finishes its work; the split is
 * all or nothing (every create refused natively, none under M:N).
 * Needs root (to change uid); exits 77 (SKIP) when not root. */
#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define N 200

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long done;

static void *worker(void *arg) {
  long id = (long)arg;
  volatile double x = 1;
  for (int i = 0; i < 20000; i++) x = x * 1.0000001 + 1e-9;
  usleep(1000);
  if (id % 10 == 0) {
    /* Calls that block in the kernel: a raw sleep and a regular-file read. */
    struct timespec ts = {0, 3 * 1000 * 1000};
    CHECK_EQ(syscall(SYS_nanosleep, &ts, NULL), 0);
    FILE *f = fopen("/proc/self/stat", "r");
    CHECK(f != NULL, "fopen");
    char buf[512];
    CHECK(fgets(buf, sizeof buf, f) != NULL, "fgets");
    fclose(f);
  }
  pthread_mutex_lock(&mu);
  done++;
  pthread_mutex_unlock(&mu);
  return arg;
}

int main(void) {
  if (geteuid() != 0) {
    fprintf(stderr, "SKIP: needs root (to change uid)\n");
    return 77;
  }
  int now = kernel_threads();
  struct rlimit rl = {(rlim_t)now, (rlim_t)now};
  CHECK_EQ(setrlimit(RLIMIT_NPROC, &rl), 0);
  CHECK_EQ(setuid(65534), 0); /* root is exempt from RLIMIT_NPROC */
  pthread_t t[N];
  int created = 0, eagain = 0;
  for (long i = 0; i < N; i++) {
    int err = pthread_create(&t[created], NULL, worker, (void *)i);
    if (err == 0)
      created++;
    else if (err == EAGAIN)
      eagain++;
    else
      CHECK(0, "pthread_create: error %d", err);
  }
  for (int i = 0; i < created; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  CHECK_EQ(done, created);
  CHECK_EQ(created + eagain, N);
  /* No split: with kernel threads every create is refused (the limit is
   * the count the process already has); with user-level threads
   * (MAX_KERNEL_THREADS set: the runner expects an M:N runtime) every
   * thread is created and runs. */
  if (getenv("MAX_KERNEL_THREADS"))
    CHECK(created == N, "M:N runtime: %d of %d threads created (%d refused)", created, N, eagain);
  else
    CHECK(created == 0, "kernel threads: %d created beyond RLIMIT_NPROC", created);
  CHECK(kernel_threads() <= now, "%d kernel threads, the limit is %d", kernel_threads(), now);
  printf("nproc_limit: %d threads created and finished, %d refused\n", created, eagain);
  return 0;
}
