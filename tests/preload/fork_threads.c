/* fork from a thread while other threads are busy or blocked: the child has
 * one thread, creates threads of its own, does I/O and exits cleanly; forks
 * from several threads at once; pthread_atfork order; posix_spawn. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

extern char **environ;
static volatile int stop;
static volatile unsigned long ticks;
static int block_pipe[2];

static void *busy(void *arg) {
  while (!stop) {
    __atomic_add_fetch(&ticks, 1, __ATOMIC_RELAXED);
    sched_yield();
  }
  return arg;
}

static void *blocked_reader(void *arg) {
  char c;
  return (void *)(long)read(block_pipe[0], &c, 1); /* blocked until the end */
}

static void *child_worker(void *arg) {
  long i = (long)arg;
  for (int k = 0; k < 100; k++) sched_yield();
  return (void *)(i * i);
}

static char order[64];
static int norder;
static volatile int recording;
static void note(char c) {
  if (recording && norder < (int)sizeof order) order[norder++] = c;
}
static void pa(void) { note('a'); }
static void pb(void) { note('b'); }
static void qa(void) { note('A'); }
static void qb(void) { note('B'); }
static void ca(void) { note('1'); }
static void cb(void) { note('2'); }

/* In the child: none of the parent's other threads runs (the busy ones
 * would move ticks); 20 threads of its own; report through fd. */
static int child_main(int fd) {
  unsigned long t0 = ticks;
  for (int i = 0; i < 2000; i++) sched_yield();
  int alone = ticks == t0;
  check_kernel_threads("fork child");
  pthread_t t[20];
  for (long i = 0; i < 20; i++)
    if (pthread_create(&t[i], NULL, child_worker, (void *)i)) return 2;
  long sum = 0;
  for (int i = 0; i < 20; i++) {
    void *r;
    if (pthread_join(t[i], &r)) return 3;
    sum += (long)r;
  }
  char msg[128];
  int n = snprintf(msg, sizeof msg, "child: %s sum %ld\n", alone ? "one thread" : "MANY", sum);
  if (write(fd, msg, n) != n) return 4;
  if (write(fd, order, norder) != norder) return 5;
  return 0;
}

static void *forker(void *arg) {
  int p[2];
  CHECK_EQ(pipe(p), 0);
  norder = 0;
  recording = 1;
  pid_t pid = fork();
  recording = 0;
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    close(p[0]);
    _exit(child_main(p[1]));
  }
  close(p[1]);
  char buf[256] = {0};
  int got = 0, n;
  while ((n = read(p[0], buf + got, sizeof buf - 1 - got)) > 0) got += n;
  close(p[0]);
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
  CHECK(strncmp(buf, "child: one thread sum 2470\n", 27) == 0, "child said: %s", buf);
  /* prepare handlers in reverse order, parent and child in order */
  CHECK(norder == 4 && memcmp(order, "baAB", 4) == 0, "parent order %.*s", norder, order);
  CHECK(strcmp(buf + 27, "ba12") == 0, "child order %s", buf + 27);
  return NULL;
}

static void *multi_forker(void *arg) {
  long id = (long)arg;
  for (int i = 0; i < 5; i++) {
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) _exit((int)(id * 10 + i));
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == id * 10 + i, "status %d", st);
  }
  return NULL;
}

int main(void) {
  CHECK_EQ(pthread_atfork(pa, qa, ca), 0);
  CHECK_EQ(pthread_atfork(pb, qb, cb), 0);
  CHECK_EQ(pipe(block_pipe), 0);
  pthread_t b[8], r[2], f;
  for (int i = 0; i < 8; i++) CHECK_EQ(pthread_create(&b[i], NULL, busy, NULL), 0);
  for (int i = 0; i < 2; i++) CHECK_EQ(pthread_create(&r[i], NULL, blocked_reader, NULL), 0);
  for (int i = 0; i < 50; i++) sched_yield();
  CHECK_EQ(pthread_create(&f, NULL, forker, NULL), 0);
  CHECK_EQ(pthread_join(f, NULL), 0);
  pthread_t m[4];
  for (long i = 0; i < 4; i++) CHECK_EQ(pthread_create(&m[i], NULL, multi_forker, (void *)i), 0);
  for (int i = 0; i < 4; i++) CHECK_EQ(pthread_join(m[i], NULL), 0);
  /* posix_spawn */
  int p[2];
  CHECK_EQ(pipe(p), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  pid_t pid;
  char *argv[] = {"echo", "spawned", NULL};
  CHECK_EQ(posix_spawnp(&pid, "echo", &fa, NULL, argv, environ), 0);
  close(p[1]);
  char buf[64] = {0};
  CHECK(read(p[0], buf, sizeof buf - 1) > 0, "read spawn output");
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(strcmp(buf, "spawned\n") == 0, "spawn output %s", buf);
  stop = 1;
  ssize_t wn = write(block_pipe[1], "xx", 2);
  CHECK(wn == 2, "write to the blocked readers: %s", strerror(errno));
  for (int i = 0; i < 8; i++) CHECK_EQ(pthread_join(b[i], NULL), 0);
  for (int i = 0; i < 2; i++) CHECK_EQ(pthread_join(r[i], NULL), 0);
  printf("fork, concurrent forks, atfork order and posix_spawn ok\n");
  return 0;
}
