/* The setuid family from one thread while others run: every kernel thread
 * of the process (/proc/self/task/N/status) shows the new credentials,
 * also with more than 1,024 kernel threads (threads blocked in flock: under
 * goshim each holds a kernel thread of its own), and with C11 threads.
 * Needs root; exits 77 (SKIP) when not root. */
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <pthread.h>
#include <sched.h>
#include <threads.h>
#include <unistd.h>
#include "common.h"

static volatile int stop;
static void *spin(void *arg) {
  while (!stop) sched_yield();
  return arg;
}

/* Every thread's "Uid:"/"Gid:" lines; returns the number of threads that
 * do not show (want_ruid, want_euid, want_egid) and the given groups count. */
static int mismatches(unsigned ruid, unsigned euid, unsigned egid, int ngroups) {
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  int bad = 0, n = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[300], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    unsigned r = 0, eu = 0, s, fs, rg, eg = 0;
    int groups = -1;
    while (fgets(line, sizeof line, f)) {
      if (!strncmp(line, "Uid:", 4)) sscanf(line + 4, "%u %u %u %u", &r, &eu, &s, &fs);
      if (!strncmp(line, "Gid:", 4)) sscanf(line + 4, "%u %u %u %u", &rg, &eg, &s, &fs);
      if (!strncmp(line, "Groups:", 7)) {
        groups = 0;
        for (char *p = line + 7; *p; p++)
          if (*p >= '0' && *p <= '9' && (p[-1] == ' ' || p[-1] == '\t')) groups++;
      }
    }
    fclose(f);
    n++;
    if (r != ruid || eu != euid || eg != egid || groups != ngroups) bad++;
  }
  closedir(d);
  return n > 0 ? bad : -1;
}

static mtx_t c11_mu;
static cnd_t c11_cv;
static int c11_stop;
static int c11_wait(void *arg) {
  mtx_lock(&c11_mu);
  while (!c11_stop) cnd_wait(&c11_cv, &c11_mu);
  mtx_unlock(&c11_mu);
  return 0;
}

static char lock_path[64];
static void *flocker(void *arg) {
  int fd = open(lock_path, O_RDONLY);
  CHECK(fd >= 0, "open %s", lock_path);
  CHECK_EQ(flock(fd, LOCK_SH), 0); /* main holds it exclusively until the end */
  close(fd);
  return arg;
}

int main(void) {
  if (geteuid() != 0) {
    fprintf(stderr, "SKIP: needs root\n");
    return 77;
  }
  pthread_t t[8];
  for (int i = 0; i < 8; i++) CHECK_EQ(pthread_create(&t[i], NULL, spin, NULL), 0);
  enum { NC11 = 100, NLOCK = 1100 };
  static thrd_t c11[NC11];
  CHECK_EQ(mtx_init(&c11_mu, mtx_plain), thrd_success);
  CHECK_EQ(cnd_init(&c11_cv), thrd_success);
  for (int i = 0; i < NC11; i++) CHECK_EQ(thrd_create(&c11[i], c11_wait, NULL), thrd_success);
  char tmp[64];
  snprintf(tmp, sizeof tmp, "/tmp/goshim-cred-%d", (int)getpid());
  int lk = open(tmp, O_CREAT | O_RDWR | O_TRUNC, 0644);
  CHECK(lk >= 0, "create %s", tmp);
  unlink(tmp); /* the lockers open it again through /proc */
  snprintf(lock_path, sizeof lock_path, "/proc/self/fd/%d", lk);
  CHECK_EQ(flock(lk, LOCK_EX), 0);
  static pthread_t lockers[NLOCK];
  pthread_attr_t small;
  pthread_attr_init(&small);
  pthread_attr_setstacksize(&small, 64 * 1024);
  for (int i = 0; i < NLOCK; i++) CHECK_EQ(pthread_create(&lockers[i], &small, flocker, NULL), 0);
  for (int i = 0; i < 200; i++) sched_yield();
  /* Wait until more than 1,024 kernel threads exist (the lockers block in
   * the kernel: under goshim each blocked call holds its own M). */
  for (int i = 0; i < 2000 && kernel_threads() <= 1024; i++) usleep(10 * 1000);
  CHECK(kernel_threads() > 1024, "%d kernel threads", kernel_threads());
  gid_t groups[] = {1000, 1001};
  CHECK_EQ(setgroups(2, groups), 0);
  CHECK_EQ(setresgid(1000, 1002, 1000), 0);
  CHECK_EQ(setegid(1003), 0);
  CHECK_EQ(setreuid(0, 1000), 0); /* euid 1000, real uid still 0: can go back */
  CHECK_EQ(mismatches(0, 1000, 1003, 2), 0);
  CHECK_EQ(seteuid(0), 0);
  CHECK_EQ(seteuid((uid_t)-1), -1);
  CHECK_EQ(setgid(0), 0);
  CHECK_EQ(setgroups(0, NULL), 0);
  CHECK_EQ(mismatches(0, 0, 0, 0), 0);
  CHECK_EQ(setuid(1000), 0); /* drops root for good, in every thread */
  CHECK_EQ(mismatches(1000, 1000, 0, 0), 0);
  CHECK_EQ(setuid(0), -1); /* EPERM everywhere now */
  CHECK_EQ(mismatches(1000, 1000, 0, 0), 0);
  stop = 1;
  for (int i = 0; i < 8; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  mtx_lock(&c11_mu);
  c11_stop = 1;
  cnd_broadcast(&c11_cv);
  mtx_unlock(&c11_mu);
  for (int i = 0; i < NC11; i++) CHECK_EQ(thrd_join(c11[i], NULL), thrd_success);
  CHECK_EQ(flock(lk, LOCK_UN), 0);
  for (int i = 0; i < NLOCK; i++) CHECK_EQ(pthread_join(lockers[i], NULL), 0);
  close(lk);
  printf("credentials changed in every kernel thread\n");
  return 0;
}
