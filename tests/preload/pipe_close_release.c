/* A pipe end the program closes is gone at once: a write to a pipe whose
 * read end the writer just closed fails with EPIPE, a read from one whose
 * write end was just closed returns end-of-file. Under goshim, its own
 * kernel thread for private file reads started lazily while the program
 * ran: its fd table was a copy of the program's (unshare(CLONE_FILES)),
 * holding every open file until it emptied it, so for that moment a closed
 * end was still open: a write "succeeded" into a pipe nobody could read
 * (the sigpipe_blocked test saw it once in about 50 runs), an EOF came
 * late. A credential change (setuid to the same uid) starts that thread.
 * Here: 100 processes, each with 4 threads that open, close one end of and
 * use 300 pipes while main changes credentials. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

enum { PROCS = 100, THREADS = 4, PIPES = 300 };
static pthread_barrier_t go;

static void *user(void *arg) {
  long id = (long)arg;
  pthread_barrier_wait(&go);
  for (int i = 0; i < PIPES; i++) {
    int p[2];
    CHECK_EQ(pipe2(p, O_NONBLOCK), 0);
    if ((i + id) % 2) {
      CHECK_EQ(close(p[0]), 0);
      long r = write(p[1], "x", 1);
      CHECK(r == -1 && errno == EPIPE, "write to a pipe whose read end is closed: %ld errno %d", r,
            errno);
      CHECK_EQ(close(p[1]), 0);
    } else {
      CHECK_EQ(close(p[1]), 0);
      char c;
      long r = read(p[0], &c, 1);
      CHECK(r == 0, "read from a pipe whose write end is closed: %ld errno %d", r, errno);
      CHECK_EQ(close(p[0]), 0);
    }
  }
  return NULL;
}

static int child(void) {
  signal(SIGPIPE, SIG_IGN);
  pthread_barrier_init(&go, NULL, THREADS + 1);
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++) CHECK_EQ(pthread_create(&t[i], NULL, user, (void *)i), 0);
  pthread_barrier_wait(&go);
  CHECK_EQ(setuid(getuid()), 0);
  for (int i = 0; i < THREADS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  return 0;
}

int main(void) {
  for (int i = 0; i < PROCS; i++) {
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) _exit(child());
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d: status 0x%x", i, st);
  }
  printf("%d processes x %d threads x %d pipes: EPIPE and EOF at once after every close\n", PROCS,
         THREADS, PIPES);
  return 0;
}
