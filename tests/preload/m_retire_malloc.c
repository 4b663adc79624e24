/* Threads that allocate, block in a call that hands their processor to
 * another kernel thread, and allocate again, in waves with pauses between
 * them: under goshim the burst of blocking calls starts extra kernel
 * threads, which are later retired one by one and replaced. The allocator's
 * per-thread caches of the retired kernel threads must be torn down when
 * they exit (a kernel thread that exits with its cache still linked into
 * the allocator's lists left a dangling link: the next thread to touch the
 * list crashed).
 * No sleeps: each wave is released once more than half of its threads are
 * blocked in the kernel (the process's kernel-thread count shows it), and
 * the next wave starts only after the count has fallen below that peak
 * (natively at once: the threads exited; under an M:N runtime, once an
 * idle kernel thread was retired), so every wave after the first runs
 * after a retirement. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define ROUNDS 4
#define THREADS 24

static long checksum[THREADS];
static char path[64];

static void churn(int id) {
  void *keep[64];
  for (int i = 0; i < 64; i++) {
    size_t sz = 16u << (i % 12); /* 16 B .. 32 KiB */
    keep[i] = malloc(sz);
    CHECK(keep[i] != NULL, "malloc %zu", sz);
    memset(keep[i], id, sz < 64 ? sz : 64);
  }
  for (int i = 0; i < 64; i++) {
    checksum[id] += ((unsigned char *)keep[i])[0];
    free(keep[i]);
  }
}

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  churn(id);
  /* main holds the lock exclusively: this blocks in the kernel. */
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0, "open");
  CHECK_EQ(flock(fd, LOCK_SH), 0);
  CHECK_EQ(close(fd), 0);
  churn(id);
  return NULL;
}

int main(void) {
  snprintf(path, sizeof path, "/tmp/goshim-m-retire-%d", (int)getpid());
  int lk = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
  CHECK(lk >= 0, "create %s", path);
  for (int r = 0; r < ROUNDS; r++) {
    pthread_t t[THREADS];
    CHECK_EQ(flock(lk, LOCK_EX), 0);
    for (int i = 0; i < THREADS; i++)
      CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i), 0);
    int peak = 0;
    for (int i = 0; i < 30000 && (peak = kernel_threads()) <= THREADS / 2; i++) usleep(1000);
    CHECK(peak > THREADS / 2, "round %d: only %d kernel threads while %d threads block", r, peak,
          THREADS);
    CHECK_EQ(flock(lk, LOCK_UN), 0);
    for (int i = 0; i < THREADS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
    int now = kernel_threads();
    for (int i = 0; i < 30000 && now >= peak; i++) {
      usleep(1000);
      now = kernel_threads();
    }
    CHECK(now < peak, "round %d: %d kernel threads 30 s after the wave (peak %d)", r, now, peak);
  }
  close(lk);
  unlink(path);
  long want = 0, got = 0;
  for (int i = 0; i < THREADS; i++) {
    want += (long)ROUNDS * 2 * 64 * (unsigned char)i;
    got += checksum[i];
  }
  CHECK_EQ(got, want);
  printf("m_retire_malloc: %d rounds of %d threads\n", ROUNDS, THREADS);
  return 0;
}
