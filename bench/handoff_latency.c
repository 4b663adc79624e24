/* How soon another runnable thread runs when one thread enters a blocking
 * call (the other thread is already running, yielding in a loop until it
 * sees the flag set just before the call): "wait" blocks in waitpid (a call that usually blocks long), "read"
 * in a read of a regular file from a cold cache (usually quick, so goshim
 * leaves it to sysmon). Prints the median delay in µs.
 *   handoff_latency wait|read [rounds] */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
static volatile int phase, other_ready;
static volatile double t_enter, t_other;
static const char *path;
static int use_read;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *blocker(void *arg) {
  if (use_read) {
    static char buf[1 << 20];
    int fd = open(path, O_RDONLY);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    while (!other_ready) sched_yield();
    t_enter = now();
    phase = 1;
    while (read(fd, buf, sizeof buf) > 0) {
    }
    close(fd);
  } else {
    pid_t pid;
    char *argv[] = {"sleep", "0.02", NULL};
    posix_spawnp(&pid, "sleep", NULL, NULL, argv, environ);
    while (!other_ready) sched_yield();
    t_enter = now();
    phase = 1;
    int st;
    waitpid(pid, &st, 0);
  }
  return NULL;
}

static void *other(void *arg) {
  other_ready = 1;
  while (phase == 0) sched_yield();
  t_other = now();
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  use_read = argc > 1 && strcmp(argv[1], "read") == 0;
  int rounds = argc > 2 ? atoi(argv[2]) : 30;
  char p[64];
  snprintf(p, sizeof p, "/tmp/goshim-bench-handoff-%d", (int)getpid());
  path = p;
  if (use_read) {
    int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    char *chunk = calloc(1, 1 << 20);
    for (int i = 0; i < 32; i++) write(fd, chunk, 1 << 20);
    fsync(fd);
    close(fd);
  }
  double lat[1000];
  for (int r = 0; r < rounds; r++) {
    phase = 0;
    other_ready = 0;
    t_other = 0;
    pthread_t a, b;
    pthread_create(&a, NULL, blocker, NULL);
    pthread_create(&b, NULL, other, NULL);
    pthread_join(b, NULL);
    pthread_join(a, NULL);
    lat[r] = (t_other - t_enter) * 1e6;
    if (lat[r] < 0) lat[r] = 0;
  }
  if (use_read) unlink(p);
  qsort(lat, rounds, sizeof lat[0], cmp);
  printf("RESULT %.1f us until another thread runs after one enters %s (median)\n",
         lat[rounds / 2], use_read ? "a cold-cache read" : "waitpid");
  return 0;
}
