/* A pool of threads reading files, from the page cache or from a cold
 * cache (posix_fadvise DONTNEED before each pass). Prints MB/s.
 *   file_read warm|cold [threads] [files] [mb_per_file] */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int nfiles, mb, cold;
static char paths[64][64];
static volatile long next_file, bytes;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *reader(void *arg) {
  char *buf = malloc(256 * 1024);
  for (;;) {
    long i = __atomic_fetch_add(&next_file, 1, __ATOMIC_RELAXED);
    if (i >= nfiles * 4) break; /* each file read 4 times */
    int fd = open(paths[i % nfiles], O_RDONLY);
    if (fd < 0) abort();
    ssize_t n;
    long got = 0;
    while ((n = read(fd, buf, 256 * 1024)) > 0) got += n;
    close(fd);
    __atomic_add_fetch(&bytes, got, __ATOMIC_RELAXED);
  }
  free(buf);
  return NULL;
}

int main(int argc, char **argv) {
  cold = argc > 1 && strcmp(argv[1], "cold") == 0;
  int threads = argc > 2 ? atoi(argv[2]) : 16;
  nfiles = argc > 3 ? atoi(argv[3]) : 16;
  mb = argc > 4 ? atoi(argv[4]) : 16;
  char *chunk = malloc(1 << 20);
  memset(chunk, 'g', 1 << 20);
  for (int i = 0; i < nfiles; i++) {
    snprintf(paths[i], sizeof paths[i], "/tmp/goshim-bench-read-%d-%d", (int)getpid(), i);
    int fd = open(paths[i], O_CREAT | O_TRUNC | O_WRONLY, 0600);
    for (int k = 0; k < mb; k++)
      if (write(fd, chunk, 1 << 20) != 1 << 20) abort();
    fsync(fd);
    close(fd);
  }
  double dt = 0;
  for (int pass = 0; pass < 2; pass++) { /* pass 0 warms up */
    for (int i = 0; i < nfiles; i++) {
      int fd = open(paths[i], O_RDONLY);
      if (cold) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      close(fd);
    }
    next_file = 0;
    bytes = 0;
    double t0 = now();
    pthread_t t[256];
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, reader, NULL);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    dt = now() - t0;
  }
  for (int i = 0; i < nfiles; i++) unlink(paths[i]);
  printf("RESULT %.1f MB/s reading %s files with %d threads\n", bytes / dt / 1e6,
         cold ? "cold" : "page-cache", threads);
  return 0;
}
