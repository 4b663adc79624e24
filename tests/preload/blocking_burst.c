/* Kernel threads stay bounded across bursts of blocking calls: 30 threads
 * wait in waitpid at once (each blocked call may need its own kernel
 * thread), then a second burst reuses the kernel threads of the first.
 * Each child (cat) blocks reading a pipe until the burst is counted, so
 * every call is still blocked when it is: the count is taken once the
 * process has BURST kernel threads inside wait4 (/proc/self/task/T/syscall),
 * then the pipe is closed and the children end. (Children that slept 0.3 s
 * let the first calls return before the last began on a loaded machine,
 * and a first burst counted low failed the comparison.) The reuse is
 * checked where the runner expects user-level threads (MAX_KERNEL_THREADS
 * set); with kernel threads (natively, goshim's 1:1 mode) each thread has
 * its own, and no burst has more. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define BURST 30
extern char **environ;
static volatile int waiting, finished;
static int rd_end; /* the children's stdin: the read end of this burst's pipe */

static void *waiter(void *arg) {
  (void)arg;
  pid_t pid;
  char *argv[] = {"cat", NULL};
  posix_spawn_file_actions_t fa;
  CHECK_EQ(posix_spawn_file_actions_init(&fa), 0);
  CHECK_EQ(posix_spawn_file_actions_adddup2(&fa, rd_end, 0), 0);
  CHECK_EQ(posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0), 0);
  CHECK_EQ(posix_spawnp(&pid, "cat", &fa, NULL, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  __atomic_add_fetch(&waiting, 1, __ATOMIC_SEQ_CST);
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cat ended with status %#x", st);
  __atomic_add_fetch(&finished, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* Kernel threads of this process now inside wait4 (glibc's waitpid). */
static int threads_in_wait4(void) {
  DIR *d = opendir("/proc/self/task");
  CHECK(d != NULL, "opendir /proc/self/task");
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[300], buf[64];
    snprintf(path, sizeof path, "/proc/self/task/%s/syscall", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue; /* it ended */
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r > 0) {
      buf[r] = 0;
      if (atoi(buf) == SYS_wait4 && buf[0] != 'r') n++;
    }
  }
  closedir(d);
  return n;
}

static int burst(void) {
  pthread_t t[BURST];
  int p[2];
  CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
  rd_end = p[0];
  waiting = 0;
  finished = 0;
  for (int i = 0; i < BURST; i++) CHECK_EQ(pthread_create(&t[i], NULL, waiter, NULL), 0);
  /* Every call blocked: the children wait for the pipe. */
  long long t0 = mono_ns_();
  while (threads_in_wait4() < BURST) {
    CHECK(mono_ns_() - t0 < 30000000000LL, "%d calls never all blocked in waitpid", BURST);
    sched_yield();
  }
  CHECK_EQ(__atomic_load_n(&finished, __ATOMIC_SEQ_CST), 0);
  int k = kernel_threads();
  const char *lim = getenv("MAX_KERNEL_THREADS");
  if (lim) CHECK(k <= atoi(lim) + BURST, "%d kernel threads for %d blocked calls", k, BURST);
  CHECK_EQ(close(p[1]), 0); /* the children read EOF and end */
  for (int i = 0; i < BURST; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  CHECK_EQ(finished, BURST);
  CHECK_EQ(close(p[0]), 0);
  return k;
}

int main(void) {
  int k1 = burst();
  int after = kernel_threads();
  int k2 = burst();
  fprintf(stderr, "kernel threads: burst 1 %d, between %d, burst 2 %d\n", k1, after, k2);
  if (getenv("MAX_KERNEL_THREADS")) {
    /* user-level threads (the runner expects an M:N runtime): the second
       burst reuses the kernel threads of the first */
    CHECK(k2 <= k1 + 2, "the second burst needed new kernel threads: %d after %d", k2, k1);
  } else {
    /* kernel threads: one per thread, none beyond */
    CHECK(k1 <= BURST + 1 && k2 <= BURST + 1, "bursts of %d threads had %d and %d kernel threads",
          BURST, k1, k2);
  }
  printf("kernel threads bounded across bursts of blocking calls\n");
  return 0;
}
