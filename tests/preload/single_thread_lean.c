/* A program that never creates a thread keeps the kernel threads and the
 * file descriptors it started with while it sleeps, reads a pipe and
 * polls with a timeout: nothing it does needs another kernel thread
 * (natively it has one throughout). Under a runtime, a helper made at a
 * sleep or a wait (a thread to spin or poll for work that cannot exist, a
 * thread to read /proc) would show up here as growth. Each step runs long
 * enough for a monitor thread to look at it more than once; no timing is
 * asserted.
 *   1. three 30 ms sleeps,
 *   2. a read of a pipe a child writes after 200 ms (checked before the
 *      child is waited for),
 *   3. poll with a 100 ms timeout on a pipe nobody writes,
 *   4. three more sleeps (an idle helper made by an earlier step would
 *      still be there).
 * (A wait in waitpid is not among them: a runtime may keep a kernel thread
 * then to return memory freed before, as goshim does.) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

/* The open descriptors, as a bitmap of the numbers below 1024 (the
 * directory's own descriptor left out), and how many are above. */
struct fds {
  unsigned char low[128];
  int high;
};

static void list_fds(struct fds *out) {
  memset(out, 0, sizeof *out);
  DIR *d = opendir("/proc/self/fd");
  CHECK(d != NULL, "opendir /proc/self/fd: %s", strerror(errno));
  int self = dirfd(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    if (fd == self) continue;
    if (fd < 1024)
      out->low[fd / 8] |= (unsigned char)(1u << (fd % 8));
    else
      out->high++;
  }
  closedir(d);
}

static int threads0;
static struct fds fds0;

static void same_as_start(const char *step) {
  int t = kernel_threads();
  CHECK(t == threads0, "after %s: %d kernel threads, %d at the start", step, t, threads0);
  struct fds now;
  list_fds(&now);
  for (int i = 0; i < 1024; i++) {
    int was = fds0.low[i / 8] >> (i % 8) & 1, is = now.low[i / 8] >> (i % 8) & 1;
    CHECK(was == is, "after %s: fd %d %s", step, i, is ? "appeared" : "disappeared");
  }
  CHECK(now.high == fds0.high, "after %s: %d descriptors above 1023, %d at the start", step,
        now.high, fds0.high);
  printf("%s: same threads and descriptors\n", step);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) CHECK(errno == EINTR, "nanosleep: %s", strerror(errno));
}

static void child_wait(long sleep_first, int wfd) {
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    sleep_ms(sleep_first);
    if (wfd >= 0) CHECK(write(wfd, "x", 1) == 1, "write: %s", strerror(errno));
    _exit(0);
  }
  if (wfd >= 0) {
    close(wfd);
    return;
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);  /* no buffer inherited by the children */
  threads0 = kernel_threads();
  CHECK(threads0 > 0, "cannot read /proc/self/status");
  list_fds(&fds0);

  for (int i = 0; i < 3; i++) sleep_ms(30);
  same_as_start("sleeps");

  int p[2];
  CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
  child_wait(200, p[1]);
  char c;
  CHECK(read(p[0], &c, 1) == 1 && c == 'x', "read: %s", strerror(errno));
  close(p[0]);
  same_as_start("pipe read");

  CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
  struct pollfd pf = {p[0], POLLIN, 0};
  CHECK(poll(&pf, 1, 100) == 0, "poll: %d", pf.revents);
  close(p[0]);
  close(p[1]);
  same_as_start("poll timeout");

  for (int i = 0; i < 3; i++) sleep_ms(30);
  same_as_start("more sleeps");

  int st;
  CHECK(wait(&st) > 0, "wait: %s", strerror(errno));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
  return 0;
}
