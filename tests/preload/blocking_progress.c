/* One thread blocked in a long call (waitpid on a child that sleeps; a
 * 1 GiB read from a file) does not stop 100 other threads from running.
 * At GOSHIM_MAXPROCS=1 only handing the processor off makes this work. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define WORKERS 100
static volatile unsigned long progress;
static volatile int stop;
extern char **environ;

static void *worker(void *arg) {
  while (!stop) {
    __atomic_add_fetch(&progress, 1, __ATOMIC_RELAXED);
    sched_yield();
  }
  return arg;
}

static void *waiter(void *arg) {
  pid_t pid;
  char *argv[] = {"sleep", "0.5", NULL};
  CHECK_EQ(posix_spawnp(&pid, "sleep", NULL, NULL, argv, environ), 0);
  unsigned long before = progress;
  int status;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  unsigned long during = progress - before;
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  CHECK(during > 0, "no thread ran while one waited in waitpid");
  return (void *)during;
}

static void *reader(void *arg) {
  const char *path = arg;
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0, "open");
  static char buf[1 << 20];
  unsigned long before = progress, total = 0;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) total += (unsigned long)n;
  close(fd);
  CHECK_EQ(total, 1UL << 30);
  CHECK(progress - before > 0, "no thread ran while one read 1 GiB");
  return NULL;
}

int main(void) {
  char path[] = "/tmp/goshim-bigfile-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp");
  CHECK_EQ(ftruncate(fd, 1L << 30), 0); /* sparse: the reads cost CPU, not disk */
  close(fd);
  pthread_t w[WORKERS], a, b;
  for (int i = 0; i < WORKERS; i++) CHECK_EQ(pthread_create(&w[i], NULL, worker, NULL), 0);
  CHECK_EQ(pthread_create(&a, NULL, waiter, NULL), 0);
  CHECK_EQ(pthread_join(a, NULL), 0);
  CHECK_EQ(pthread_create(&b, NULL, reader, path), 0);
  CHECK_EQ(pthread_join(b, NULL), 0);
  stop = 1;
  for (int i = 0; i < WORKERS; i++) CHECK_EQ(pthread_join(w[i], NULL), 0);
  unlink(path);
  printf("100 threads ran during waitpid and during a 1 GiB read\n");
  return 0;
}
