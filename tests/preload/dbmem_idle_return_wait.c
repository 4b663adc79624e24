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
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "dbmem_burst.h"

/* In the child: a page of the parent's from its pagemap (present bit). */
static int pagemap_present(uintptr_t a, void *ctx) {
  uint64_t e = 0;
  if (pread(*(int *)ctx, &e, sizeof e, (off_t)(a / page * sizeof e)) != (ssize_t)sizeof e) return -1;
  return (int)((e >> 63) & 1);
}

int main(void) {
  burst();
  long total = BURST_PAGES(page);
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
      res = burst_resident(pagemap_present, &fd);
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
