/* A known workload for the observability tests: NWORK named threads that
 * compute for MS milliseconds each, one thread that makes blocking calls
 * (fsync), all joined by main. Ordinary pthread code.
 *   obs_workers [nwork [ms]]                                               */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int ms = 600;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *compute(void *arg) {
  char name[16];
  snprintf(name, sizeof name, "worker-%ld", (long)arg);
  pthread_setname_np(pthread_self(), name);
  volatile unsigned long x = 0;
  double end = now_ms() + ms;
  while (now_ms() < end)
    for (int i = 0; i < 10000; i++) x += i;
  return NULL;
}

static void *syncer(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "syncer");
  char path[] = "/tmp/obs_workers.XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return (void *)1;
  unlink(path);
  double end = now_ms() + ms;
  while (now_ms() < end) {
    if (write(fd, "x", 1) != 1 || fsync(fd) != 0) break;
    usleep(1000);
  }
  close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8;
  if (argc > 2) ms = atoi(argv[2]);
  pthread_t t[1024], s;
  if (n > 1024) n = 1024;
  pthread_create(&s, NULL, syncer, NULL);
  for (long i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, compute, (void *)i) != 0) return 1;
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  void *r;
  pthread_join(s, &r);
  printf("done %d\n", n);
  return r == NULL ? 0 : 1;
}
