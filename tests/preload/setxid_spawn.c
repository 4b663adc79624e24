/* Threads that block in flock() each hold a kernel thread (natively their
 * own; under an M:N runtime, one each while blocked), and they must all
 * get to block while another thread changes credentials without pause
 * (setresuid to the same ids: every thread of the process takes part).
 * 128 threads wait on a file main holds locked with flock; main sees
 * each request pending in /proc/locks (a real handshake, no sleep), then
 * lets them through one by one. The credential loop runs until then. */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common.h"

enum { kWaiters = 128 };

static char path[64];
static atomic_int stop;
static atomic_long cred_rounds;
static atomic_int got;

static void *cred_changer(void *arg) {
  (void)arg;
  uid_t r, e, s;
  CHECK(getresuid(&r, &e, &s) == 0, "getresuid");
  while (!atomic_load(&stop)) {
    CHECK(setresuid(r, e, s) == 0, "setresuid: %s", strerror(errno));
    atomic_fetch_add(&cred_rounds, 1);
  }
  return NULL;
}

static void *waiter(void *arg) {
  (void)arg;
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0, "open: %s", strerror(errno));
  CHECK(flock(fd, LOCK_EX) == 0, "flock: %s", strerror(errno));
  atomic_fetch_add(&got, 1);
  CHECK(flock(fd, LOCK_UN) == 0, "unlock");
  close(fd);
  return NULL;
}

/* Pending flock requests on inode ino in /proc/locks ("N: -> FLOCK ..."). */
static int pending(unsigned long ino) {
  FILE *f = fopen("/proc/locks", "r");
  CHECK(f != NULL, "/proc/locks: %s", strerror(errno));
  char line[256];
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned maj, min;
    unsigned long i;
    char *arrow = strstr(line, "-> FLOCK");
    if (!arrow) continue;
    if (sscanf(arrow, "-> FLOCK %*s %*s %*d %x:%x:%lu", &maj, &min, &i) == 3 && i == ino) n++;
  }
  fclose(f);
  return n;
}

int main(void) {
  snprintf(path, sizeof path, "/tmp/setxid_spawn.%d", (int)getpid());
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0, "create: %s", strerror(errno));
  struct stat st;
  CHECK(fstat(fd, &st) == 0, "fstat");
  CHECK(flock(fd, LOCK_EX) == 0, "flock");
  pthread_t c, w[kWaiters];
  CHECK_EQ(pthread_create(&c, NULL, cred_changer, NULL), 0);
  while (atomic_load(&cred_rounds) < 100) sched_yield();
  for (int i = 0; i < kWaiters; i++) CHECK_EQ(pthread_create(&w[i], NULL, waiter, NULL), 0);
  while (pending(st.st_ino) < kWaiters) sched_yield();
  atomic_store(&stop, 1);
  CHECK_EQ(pthread_join(c, NULL), 0);
  CHECK(flock(fd, LOCK_UN) == 0, "unlock");
  for (int i = 0; i < kWaiters; i++) CHECK_EQ(pthread_join(w[i], NULL), 0);
  CHECK_EQ(atomic_load(&got), kWaiters);
  close(fd);
  CHECK(unlink(path) == 0, "unlink");
  printf("%d threads blocked in flock while credentials changed, then all got the lock\n", kWaiters);
  return 0;
}
