/* Memory freed by a burst of threads goes back to the system while every
 * thread of the process waits with no timeout.
 *
 * As dbmem_idle_return, but nothing in the process wakes up by itself
 * afterwards: the main thread waits in waitpid() for a child process that
 * watches the freed pages from outside (/proc/PID/pagemap's present bit;
 * an unmapped page reads as not present) and exits 0 once at most 1/8 of
 * them are resident, polling every 0.1 s for at most 60 s, 1 if they stay.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define NTHREADS 32
#define NBLOCKS 8
#define BLOCK (256 << 10)

static pthread_barrier_t all_allocated;
static char *blocks[NTHREADS][NBLOCKS];
static long page;

static void *conn(void *arg) {
  int id = (int)(long)arg;
  for (int i = 0; i < NBLOCKS; i++) {
    char *p = malloc(BLOCK);
    CHECK(p != NULL, "malloc");
    for (long o = 0; o < BLOCK; o += page) p[o] = (char)(id + i + 1);
    blocks[id][i] = p;
  }
  pthread_barrier_wait(&all_allocated);
  for (int i = 0; i < NBLOCKS; i++) {
    char *p = blocks[id][i];
    for (long o = 0; o < BLOCK; o += page)
      CHECK(p[o] == (char)(id + i + 1), "block %d of thread %d lost its contents", i, id);
    free(p);
  }
  return NULL;
}

/* In the child: resident pages of the parent's freed blocks. */
static long resident_pages(int fd) {
  long n = 0;
  for (int t = 0; t < NTHREADS; t++)
    for (int i = 0; i < NBLOCKS; i++) {
      uintptr_t lo = (uintptr_t)blocks[t][i] & ~(uintptr_t)(page - 1);
      uintptr_t hi = ((uintptr_t)blocks[t][i] + BLOCK + page - 1) & ~(uintptr_t)(page - 1);
      for (uintptr_t a = lo; a < hi; a += page) {
        uint64_t e = 0;
        ssize_t r = pread(fd, &e, sizeof e, (off_t)(a / page * sizeof e));
        if (r != (ssize_t)sizeof e) return -1;
        n += (e >> 63) & 1;
      }
    }
  return n;
}

int main(void) {
  page = sysconf(_SC_PAGESIZE);
  CHECK(page > 0, "page size");
  pthread_t th[NTHREADS];
  CHECK_EQ(pthread_barrier_init(&all_allocated, NULL, NTHREADS), 0);
  for (int t = 0; t < NTHREADS; t++)
    CHECK_EQ(pthread_create(&th[t], NULL, conn, (void *)(long)t), 0);
  for (int t = 0; t < NTHREADS; t++) CHECK_EQ(pthread_join(th[t], NULL), 0);

  long total = (long)NTHREADS * NBLOCKS * (BLOCK / page);
  long ceiling = total / 8;
  fflush(stdout);
  pid_t parent = getpid();
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/pagemap", (int)parent);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
      fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
      _exit(77);
    }
    struct timespec tenth = {0, 100 * 1000 * 1000};
    long res = -1;
    for (int i = 0; i < 600; i++) {
      res = resident_pages(fd);
      if (res < 0) _exit(3);
      if (res <= ceiling) _exit(0);
      nanosleep(&tenth, NULL);
    }
    fprintf(stderr, "%ld of %ld freed pages still resident after 60 s (ceiling %ld)\n", res, total,
            ceiling);
    _exit(1);
  }
  int st = 0;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st), "watcher: status %#x", st);
  if (WEXITSTATUS(st) == 77) return 77;
  CHECK(WEXITSTATUS(st) != 3, "watcher: cannot read the parent's pagemap");
  printf("%d threads freed %d MiB; back to the system while every thread waits: %s\n", NTHREADS,
         NTHREADS * NBLOCKS * (BLOCK >> 10) >> 10, WEXITSTATUS(st) == 0 ? "yes" : "no");
  return WEXITSTATUS(st) == 0 ? 0 : 1;
}
