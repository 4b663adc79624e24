/* A signal sent to a thread that blocks it, just as that thread goes
 * back into sigwait, is received: the waiter loops on
 * sigwait and acknowledges each signal; the sender sends the next one as
 * soon as it sees the acknowledgement, so that the send races with the
 * waiter's entry into its next wait. Each is received exactly once.
 *   1. pthread_kill from another thread (thread-directed);
 *   2. kill from a forked child process (process-directed), with nothing
 *      else running;
 *   3. the same while a thread that blocks the signal spins (the waiter
 *      shares the processors with it);
 * A lost signal leaves the program waiting forever (the runner's timeout). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

static sigset_t wset;
static int ackp[2];  /* waiter -> sender: one byte per signal received */
static int rounds;

static void *waiter(void *arg) {
  for (int i = 0; i < rounds; i++) {
    int sig = 0;
    CHECK_EQ(sigwait(&wset, &sig), 0);
    CHECK_EQ(sig, SIGUSR1);
    CHECK_EQ(write(ackp[1], "a", 1), 1);
  }
  return NULL;
}

static atomic_int stop;
static void *busy(void *arg) {
  volatile unsigned long c = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) c++;
  return NULL;
}

/* The child sends SIGUSR1 to the parent, then one more after each
   acknowledgement, rounds in all. */
static void from_child(void *(*fn)(void *), int n, int with_busy) {
  rounds = n;
  CHECK_EQ(pipe(ackp), 0);
  pthread_t w, b;
  atomic_store(&stop, 0);
  if (with_busy) CHECK_EQ(pthread_create(&b, NULL, busy, NULL), 0);
  CHECK_EQ(pthread_create(&w, NULL, fn, NULL), 0);
  pid_t parent = getpid();
  pid_t child = fork();
  CHECK(child >= 0, "fork");
  if (child == 0) {
    for (int i = 0; i < n; i++) {
      if (kill(parent, SIGUSR1) != 0) _exit(2);
      char c;
      if (i + 1 < n && read(ackp[0], &c, 1) != 1) _exit(3);
    }
    _exit(0);
  }
  int st;
  CHECK_EQ(waitpid(child, &st, 0), child);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
  CHECK_EQ(pthread_join(w, NULL), 0);
  char c;
  CHECK_EQ(read(ackp[0], &c, 1), 1); /* the last acknowledgement */
  atomic_store(&stop, 1);
  if (with_busy) CHECK_EQ(pthread_join(b, NULL), 0);
  close(ackp[0]);
  close(ackp[1]);
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  sigemptyset(&wset);
  sigaddset(&wset, SIGUSR1);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &wset, NULL), 0);

  /* 1. pthread_kill */
  rounds = 3000;
  CHECK_EQ(pipe(ackp), 0);
  pthread_t w;
  CHECK_EQ(pthread_create(&w, NULL, waiter, NULL), 0);
  for (int i = 0; i < rounds; i++) {
    CHECK_EQ(pthread_kill(w, SIGUSR1), 0);
    char c;
    CHECK_EQ(read(ackp[0], &c, 1), 1);
  }
  CHECK_EQ(pthread_join(w, NULL), 0);
  close(ackp[0]);
  close(ackp[1]);
  printf("pthread_kill to a thread entering sigwait: every signal received\n");

  /* 2. kill from another process */
  from_child(waiter, 3000, 0);
  printf("kill from another process to a thread entering sigwait: every signal received\n");

  /* 3. the same beside a spinning thread */
  from_child(waiter, 200, 1);
  printf("the same beside a spinning thread: every signal received\n");

  return 0;
}
