// A lock passed between processes, each of which ends right after its
// release: the pattern of a process pool's workers sharing a queue's lock
// (a process-shared semaphore) and exiting at shutdown. Each round has
// two workers, X and Y, and a semaphore at 0. Each first waits once on it
// until the parent posts it (a warm-up: both have waited on the word
// before). Then X waits on it again until the parent posts, tells Y
// through a pipe, and once Y is asleep (its state in /proc is S: natively
// in its sem_wait) posts the semaphore and ends at once (by turns _exit,
// syscall(SYS_exit_group) and exit). Y must get that token. A wake lost when X's
// process ends (Y asleep on a semaphore that holds a token) hangs a
// round, and the test times out. Every printed figure is independent of
// scheduling.
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kRounds = 1000 };

struct Shared {
  sem_t sem;
  long takes;
};

static void must_read(int fd) {
  char c;
  if (read(fd, &c, 1) != 1) _exit(3);
}

static void must_write(int fd) {
  if (write(fd, "x", 1) != 1) _exit(4);
}

// Waits until process pid sleeps (state S in /proc/pid/stat).
static void wait_asleep(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  for (;;) {
    FILE* f = fopen(path, "r");
    if (!f) _exit(5);
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char* p = strrchr(buf, ')');
    if (p && p[1] == ' ' && p[2] == 'S') return;
  }
}

static void take(struct Shared* s) {
  while (sem_wait(&s->sem) != 0) {
  }
  __atomic_fetch_add(&s->takes, 1, __ATOMIC_RELAXED);  // X and Y take at once in the warm-up
}

int main(void) {
  struct Shared* s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  if (sem_init(&s->sem, 1, 0) != 0) {
    perror("sem_init");
    return 1;
  }
  int bad = 0;
  for (int r = 0; r < kRounds; r++) {
    int ready[2], pass[2];
    if (pipe(ready) || pipe(pass)) {
      perror("pipe");
      return 1;
    }
    int ypid[2];
    if (pipe(ypid)) {
      perror("pipe");
      return 1;
    }
    pid_t y = fork();
    if (y == 0) {
      must_write(ready[1]);
      take(s);  // warm-up
      must_read(pass[0]);
      take(s);
      _exit(0);
    }
    pid_t x = fork();
    if (x == 0) {
      pid_t yp;
      if (read(ypid[0], &yp, sizeof yp) != sizeof yp) _exit(6);
      must_write(ready[1]);
      take(s);  // warm-up
      must_write(ready[1]);
      take(s);
      must_write(pass[1]);
      wait_asleep(yp);
      sem_post(&s->sem);
      if (r % 3 == 0) _exit(0);
      if (r % 3 == 1) syscall(SYS_exit_group, 0);
      exit(0);
    }
    if (x < 0 || y < 0) {
      perror("fork");
      return 1;
    }
    if (write(ypid[1], &y, sizeof y) != sizeof y) return 1;
    // Warm-ups: each worker announces itself, then waits for a post.
    must_read(ready[0]);
    must_read(ready[0]);
    sem_post(&s->sem);
    sem_post(&s->sem);
    must_read(ready[0]);  // X's second wait
    sem_post(&s->sem);
    int st;
    if (waitpid(x, &st, 0) != x || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    if (waitpid(y, &st, 0) != y || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    close(ready[0]);
    close(ready[1]);
    close(pass[0]);
    close(pass[1]);
    close(ypid[0]);
    close(ypid[1]);
    int v;
    sem_getvalue(&s->sem, &v);
    if (v != 0) {
      printf("round %d: semaphore value %d after the workers ended\n", r, v);
      return 1;
    }
  }
  printf("rounds %d, takes %ld (expected %d), workers failed %d\n", kRounds, s->takes, 4 * kRounds,
         bad);
  return s->takes == 4L * kRounds && bad == 0 ? 0 : 1;
}
