/* Where an idle thread's resident bytes are: N threads (default 20,000)
 * check in and block, a third each on a condition variable, in read() on
 * a pipe and in nanosleep. Once all have checked in:
 *   - the process's resident growth per thread (VmRSS, as idle_threads);
 *   - for every thread, which pages around its thread pointer are
 *     resident (/proc/self/pagemap; on x86-64 glibc pthread_t is the
 *     thread pointer, struct pthread lies above it and the static TLS
 *     below it), as a histogram of page offsets from the thread
 *     pointer's page;
 *   - from pthread_getattr_np: where the stack's top lies relative to the
 *     thread pointer, and how deep each kind of thread wrote its stack
 *     (the lowest non-zero word among the stack's resident pages; only
 *     where the stack ends below the thread pointer: glibc's own threads
 *     report a stack that holds their TLS block);
 *   - the resident pages elsewhere: total growth less those counted
 *     around the thread pointers.
 * Read-only: it maps no page it did not find resident.
 *   idle_pages [threads=20000] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LO (-8) /* pages below the thread pointer's page */
#define HI 2    /* and above it */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t checked_in = PTHREAD_COND_INITIALIZER, go_cv = PTHREAD_COND_INITIALIZER;
static int count, release;
static int pfd[2];

static long status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) v = atol(line + strlen(key));
  if (f) fclose(f);
  return v;
}

static void *idle(void *arg) {
  long kind = (long)arg % 3;
  pthread_mutex_lock(&mu);
  count++;
  pthread_cond_signal(&checked_in);
  if (kind == 0)
    while (!release) pthread_cond_wait(&go_cv, &mu);
  pthread_mutex_unlock(&mu);
  if (kind == 1) {
    char c;
    if (read(pfd[0], &c, 1) != 0) abort(); /* EOF once main closes the write end */
  } else if (kind == 2) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    while (!__atomic_load_n(&release, __ATOMIC_ACQUIRE)) nanosleep(&ts, NULL);
  }
  return NULL;
}

static int resident(int pm, uintptr_t addr) {
  uint64_t e = 0;
  if (pread(pm, &e, 8, (off_t)(addr / 4096) * 8) != 8) return 0;
  return (int)(e >> 63);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  if (n < 3 || pipe(pfd)) return 1;
  pthread_t *t = malloc(sizeof(pthread_t) * n);
  if (!t) return 1;
  memset(t, 0, sizeof(pthread_t) * n);
  long before = status_kb("VmRSS:");
  for (int i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, idle, (void *)(long)i)) {
      fprintf(stderr, "pthread_create failed at %d\n", i);
      return 1;
    }
  pthread_mutex_lock(&mu);
  while (count < n) pthread_cond_wait(&checked_in, &mu);
  pthread_mutex_unlock(&mu);
  usleep(200 * 1000); /* the last ones from check-in to their wait */
  long after = status_kb("VmRSS:");
  int pm = open("/proc/self/pagemap", O_RDONLY);
  if (pm < 0) {
    perror("pagemap");
    return 1;
  }
  long hist[HI - LO] = {0}, around = 0;
  for (int i = 0; i < n; i++) {
    uintptr_t pg = (uintptr_t)t[i] & ~(uintptr_t)4095;
    for (int d = LO; d < HI; d++)
      if (resident(pm, pg + (intptr_t)d * 4096)) hist[d - LO]++, around++;
  }
  printf("RESULT %.0f bytes resident per idle thread (%d threads)\n",
         (double)(after - before) * 1024 / n, n);
  printf("thread pointer at page offset %lu\n", (unsigned long)((uintptr_t)t[n - 1] & 4095));
  for (int d = LO; d < HI; d++)
    if (hist[d - LO])
      printf("page tp%+d: resident in %ld of %d threads\n", d, hist[d - LO], n);
  printf("pages around the thread pointers: %.0f bytes a thread; elsewhere: %.0f bytes a thread\n",
         (double)around * 4096 / n, ((double)(after - before) * 1024 - (double)around * 4096) / n);
  long depth_max[3] = {0}, depth_sum[3] = {0}, nk[3] = {0};
  long tp_minus_hi = 0;
  for (int i = 0; i < n; i++) {
    pthread_attr_t a;
    void *lo;
    size_t sz;
    if (pthread_getattr_np(t[i], &a) != 0) continue;
    pthread_attr_getstack(&a, &lo, &sz);
    pthread_attr_destroy(&a);
    uintptr_t hi = (uintptr_t)lo + sz, p = hi, lowest = hi;
    tp_minus_hi = (long)((uintptr_t)t[i] - hi);
    if (hi > (uintptr_t)t[i]) continue;
    /* Down page by page while resident: the lowest non-zero word. */
    while (p - 4096 >= (uintptr_t)lo && resident(pm, (p - 1) & ~(uintptr_t)4095)) {
      uintptr_t pl = (p - 1) & ~(uintptr_t)4095;
      for (uintptr_t w = pl; w < p; w += 8)
        if (*(volatile uint64_t *)w) {
          lowest = w;
          break;
        }
      p = pl;
    }
    int k = i % 3;
    long d = (long)(hi - lowest);
    depth_sum[k] += d;
    nk[k]++;
    if (d > depth_max[k]) depth_max[k] = d;
  }
  if (tp_minus_hi > 0)
    printf("stack top at tp-%ld (page offset %lu)\n", tp_minus_hi,
           (unsigned long)(((uintptr_t)t[n - 1] - tp_minus_hi) & 4095));
  const char *kinds[3] = {"condvar", "read", "nanosleep"};
  for (int k = 0; k < 3; k++)
    if (nk[k])
      printf("stack written by %-9s threads: %ld bytes on average, %ld at most\n", kinds[k],
             depth_sum[k] / nk[k], depth_max[k]);
  pthread_mutex_lock(&mu);
  release = 1;
  pthread_cond_broadcast(&go_cv);
  pthread_mutex_unlock(&mu);
  close(pfd[1]);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  return 0;
}
