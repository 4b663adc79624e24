/* A thread exchanging bytes with another process over a socket while
 * every processor always has other threads ready to run: threads that
 * compute a little and yield, and a pair handing a token back and forth
 * through a mutex and condition variables. The kernel wakes a thread
 * blocked in read() as soon as its data arrives, whatever else is
 * runnable, so the exchange goes on at the pace of the two processes.
 * The echo process answers each byte 0.2 ms after it came.
 * EXCHANGES round trips fit well within the case's timeout unless each
 * reply waits until some processor runs out of ready threads or a
 * periodic check notices it (10 ms each, the whole exchange then takes
 * far longer than the timeout). Every byte is checked. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define EXCHANGES 4000

static atomic_int done;
static volatile unsigned long sink;

static void *yielder(void *arg) {
  (void)arg;
  unsigned long x = 1;
  while (!atomic_load_explicit(&done, memory_order_relaxed)) {
    for (int i = 0; i < 200; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
    sched_yield();
  }
  sink = x;
  return NULL;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn[2] = {PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};
static int token;

static void *player(void *arg) {
  int me = (int)(long)arg;
  pthread_mutex_lock(&mu);
  while (!atomic_load_explicit(&done, memory_order_relaxed)) {
    while (token != me && !atomic_load_explicit(&done, memory_order_relaxed))
      pthread_cond_wait(&turn[me], &mu);
    token = 1 - me;
    pthread_cond_signal(&turn[1 - me]);
  }
  pthread_cond_signal(&turn[1 - me]);
  pthread_mutex_unlock(&mu);
  return NULL;
}

int main(void) {
  int sv[2];
  CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    /* The echo process: single-threaded, blocking calls. */
    close(sv[0]);
    unsigned char c;
    for (;;) {
      ssize_t n = read(sv[1], &c, 1);
      if (n == 0) _exit(0);
      if (n != 1) _exit(2);
      /* Reply a moment later, so that the reader is blocked in read()
       * when the reply comes (only the pace depends on it). */
      usleep(200);
      c = (unsigned char)(c + 1);
      if (write(sv[1], &c, 1) != 1) _exit(3);
    }
  }
  close(sv[1]);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  if (ncpu > 64) ncpu = 64;
  int ny = (int)ncpu + 1;
  pthread_t y[65], p[2];
  for (int i = 0; i < ny; i++) CHECK_EQ(pthread_create(&y[i], NULL, yielder, NULL), 0);
  for (long i = 0; i < 2; i++) CHECK_EQ(pthread_create(&p[i], NULL, player, (void *)i), 0);
  for (int i = 0; i < EXCHANGES; i++) {
    unsigned char c = (unsigned char)i, r = 0;
    CHECK_EQ(write(sv[0], &c, 1), 1);
    CHECK_EQ(read(sv[0], &r, 1), 1);
    CHECK_EQ(r, (unsigned char)(c + 1));
  }
  atomic_store(&done, 1);
  for (int i = 0; i < ny; i++) CHECK_EQ(pthread_join(y[i], NULL), 0);
  for (int i = 0; i < 2; i++) CHECK_EQ(pthread_join(p[i], NULL), 0);
  close(sv[0]);
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "echo process status %d", st);
  printf("%d round trips beside busy threads\n", EXCHANGES);
  return 0;
}
