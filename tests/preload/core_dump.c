/* A crash with core dumps on ends as fast as natively, with a core.
 *
 * A forked child sets RLIMIT_CORE to unlimited, chdir()s to a temporary
 * directory, starts threads (idle ones, and one that crashes with SIGSEGV
 * a few frames deep). The parent waits at most CORE_DUMP_BOUND_S seconds
 * (default 60; waitpid polling, SIGKILL at the bound: FAIL), then checks
 * WIFSIGNALED, WTERMSIG == SIGSEGV and WCOREDUMP, that a core file was
 * written, and how much disk it takes (at most 512 MiB), and removes it.
 *
 * Under goshim before the arena was MADV_DONTDUMP, the kernel walked the
 * ~16 TiB goroutine arena page by page: still dumping after minutes.
 *
 * SKIP (exit 77) when the kernel would not write the core into the
 * working directory: /proc/sys/kernel/core_pattern empty, a pipe
 * (systemd-coredump, apport) or an absolute path; or the hard
 * RLIMIT_CORE is 0. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static void *idle(void *arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

static volatile int sink;
static int *volatile bad = (int *)8;
__attribute__((noinline)) static void crash_at(int depth) {
  volatile char buf[4096]; /* some stack in use */
  buf[0] = (char)depth;
  if (depth > 0) {
    crash_at(depth - 1);
    sink = buf[0];
    return;
  }
  *bad = 1;
}

static void *crasher(void *arg) {
  (void)arg;
  usleep(20000);
  crash_at(8);
  return NULL;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int main(void) {
  char pat[256] = "";
  FILE *f = fopen("/proc/sys/kernel/core_pattern", "r");
  if (f) {
    if (!fgets(pat, sizeof pat, f)) pat[0] = 0;
    fclose(f);
  }
  pat[strcspn(pat, "\n")] = 0;
  if (pat[0] == 0 || pat[0] == '|' || pat[0] == '/') {
    fprintf(stderr, "SKIP: core_pattern '%s' does not write a core into the working directory\n",
            pat);
    return 77;
  }
  struct rlimit rl;
  CHECK_EQ(getrlimit(RLIMIT_CORE, &rl), 0);
  if (rl.rlim_max == 0) {
    fprintf(stderr, "SKIP: hard RLIMIT_CORE is 0\n");
    return 77;
  }
  char dir[] = "/tmp/goshim_core_dump.XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
  int bound_s = env_int("CORE_DUMP_BOUND_S", 60);

  long long t0 = now_ms();
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    rl.rlim_cur = rl.rlim_max; /* RLIM_INFINITY when the hard limit allows it */
    if (setrlimit(RLIMIT_CORE, &rl) != 0) _exit(20);
    if (chdir(dir) != 0) _exit(21);
    pthread_t t[5];
    for (int i = 0; i < 4; i++)
      if (pthread_create(&t[i], NULL, idle, NULL) != 0) _exit(22);
    if (pthread_create(&t[4], NULL, crasher, NULL) != 0) _exit(23);
    pthread_join(t[4], NULL);
    _exit(24); /* not reached */
  }
  int st = 0;
  pid_t w;
  while ((w = waitpid(pid, &st, WNOHANG)) == 0 && now_ms() - t0 < bound_s * 1000LL)
    usleep(10000);
  long long took = now_ms() - t0;
  int timed_out = w == 0;
  if (timed_out) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }

  /* The core (core, core.PID, whatever the pattern made of it): its size,
   * then away, as the directory. */
  long long apparent = 0, disk = 0;
  int files = 0;
  DIR *d = opendir(dir);
  CHECK(d != NULL, "opendir %s: %s", dir, strerror(errno));
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (stat(p, &sb) == 0) {
      apparent += sb.st_size;
      disk += (long long)sb.st_blocks * 512;
      files++;
    }
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
  fprintf(stderr, "core_dump: child ended after %lld ms, %d file(s), %lld bytes apparent, %lld on disk\n",
          took, files, apparent, disk);

  CHECK(!timed_out, "the crashing child still ran (dumping) after %d s: killed", bound_s);
  CHECK(WIFSIGNALED(st), "status 0x%x", st);
  CHECK_EQ(WTERMSIG(st), SIGSEGV);
  CHECK(WCOREDUMP(st), "no core dumped (status 0x%x)", st);
  CHECK(files >= 1, "WCOREDUMP but no core file in %s", dir);
  CHECK(disk <= 512LL << 20, "core takes %lld bytes on disk", disk);
  printf("ok\n");
  return 0;
}
