/* fork while other threads are in the middle of file-descriptor calls and
 * semaphore waits: the child has only the forking thread, so nothing of
 * what the others were doing may hold it up. Each child closes the fds the
 * busy threads use (as a subprocess does before exec) and posts to and
 * waits on the semaphore they contend for, then exits 0.
 *
 * Found by verify13b: under goshim's 1:1 mode (glibc 2.31, GOSHIM_MODE=1:1)
 * the child's close() spun for ever on a count of a parent thread that had
 * been taking a reference to the fd at the moment of fork (Python 3.9's
 * subprocess from threads, Debian 11). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define NFORKS 600
#define NBUSY 3

static volatile int stop;
static int pipefd[2], sv[2];
static sem_t sem;

/* fcntl(F_SETFL) and dup look the fd up; shutdown and setsockopt too. */
static void *fd_busy(void *arg) {
  long k = (long)arg;
  unsigned long n = 0;
  while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
    int fd = (n & 1) ? pipefd[0] : sv[k & 1];
    int fl = fcntl(fd, F_GETFL);
    CHECK(fl >= 0, "F_GETFL: %s", strerror(errno));
    CHECK(fcntl(fd, F_SETFL, fl ^ O_NONBLOCK) == 0, "F_SETFL: %s", strerror(errno));
    CHECK(fcntl(fd, F_SETFL, fl) == 0, "F_SETFL: %s", strerror(errno));
    int d = dup(pipefd[1]);
    CHECK(d >= 0, "dup: %s", strerror(errno));
    CHECK_EQ(close(d), 0);
    /* Under M:N the forking thread gets a processor back soon. */
    sched_yield();
    n++;
  }
  return NULL;
}

/* Contended waits and posts: waiters queue in the slow path. */
static void *sem_busy(void *arg) {
  while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
    CHECK_EQ(sem_wait(&sem), 0);
    sched_yield();
    CHECK_EQ(sem_post(&sem), 0);
  }
  return arg;
}

static void child(void) {
  /* A token of its own first: natively the wait then never blocks, whatever
   * the parent's threads held at the fork. */
  if (sem_post(&sem) != 0 || sem_wait(&sem) != 0) _exit(3);
  if (close(pipefd[0]) != 0 || close(pipefd[1]) != 0) _exit(4);
  if (close(sv[0]) != 0 || close(sv[1]) != 0) _exit(5);
  _exit(0);
}

int main(void) {
  CHECK_EQ(pipe(pipefd), 0);
  CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  CHECK_EQ(sem_init(&sem, 0, 1), 0);
  pthread_t t[2 * NBUSY];
  for (long i = 0; i < NBUSY; i++) {
    CHECK_EQ(pthread_create(&t[i], NULL, fd_busy, (void *)i), 0);
    CHECK_EQ(pthread_create(&t[NBUSY + i], NULL, sem_busy, NULL), 0);
  }
  for (int i = 0; i < NFORKS; i++) {
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) child();
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork %d: child status %#x", i, st);
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < 2 * NBUSY; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  printf("%d children closed the busy fds and used the semaphore\n", NFORKS);
  return 0;
}
