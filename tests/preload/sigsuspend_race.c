/* A thread that loops on sigsuspend while signals arrive receives each
 * one: its handler runs exactly once per signal and sigsuspend returns
 * -1/EINTR every time. The signal is blocked outside sigsuspend; the
 * sender sends the next one as soon as it sees the acknowledgement of the
 * previous one, so that every send races with the thread's way back into
 * sigsuspend.
 *   1. pthread_kill from another thread (thread-directed);
 *   2. kill() from another thread of the process (process-directed);
 *   3. kill() from a forked child process;
 *   4. the same while a thread that blocks the signal spins.
 * A lost signal leaves the program waiting forever (the runner's timeout). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

static int ackp[2]; /* suspender -> sender: one byte per handler run */
static int rounds;
static atomic_int handled;
static atomic_int wrong;

static void on_usr1(int sig) {
  if (sig != SIGUSR1) atomic_store(&wrong, 1);
  atomic_fetch_add(&handled, 1);
}

static void *suspender(void *arg) {
  sigset_t open;
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &open), 0);
  CHECK(sigismember(&open, SIGUSR1), "SIGUSR1 blocked in the thread");
  sigdelset(&open, SIGUSR1);
  for (int i = 0; i < rounds; i++) {
    int before = atomic_load(&handled);
    errno = 0;
    CHECK_EQ(sigsuspend(&open), -1);
    CHECK_EQ(errno, EINTR);
    CHECK(atomic_load(&handled) == before + 1, "round %d: %d handlers ran", i,
          atomic_load(&handled) - before);
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

/* Sends rounds signals, each after the previous one's acknowledgement. */
static void in_process(int thread_directed, int n) {
  rounds = n;
  atomic_store(&handled, 0);
  CHECK_EQ(pipe(ackp), 0);
  pthread_t w;
  CHECK_EQ(pthread_create(&w, NULL, suspender, NULL), 0);
  for (int i = 0; i < n; i++) {
    if (thread_directed)
      CHECK_EQ(pthread_kill(w, SIGUSR1), 0);
    else
      CHECK_EQ(kill(getpid(), SIGUSR1), 0);
    char c;
    CHECK_EQ(read(ackp[0], &c, 1), 1);
  }
  CHECK_EQ(pthread_join(w, NULL), 0);
  CHECK_EQ(atomic_load(&handled), n);
  close(ackp[0]);
  close(ackp[1]);
}

static void from_child(int n, int with_busy) {
  rounds = n;
  atomic_store(&handled, 0);
  CHECK_EQ(pipe(ackp), 0);
  pthread_t w, b;
  atomic_store(&stop, 0);
  if (with_busy) CHECK_EQ(pthread_create(&b, NULL, busy, NULL), 0);
  CHECK_EQ(pthread_create(&w, NULL, suspender, NULL), 0);
  pid_t parent = getpid();
  pid_t child = fork();
  CHECK(child >= 0, "fork");
  if (child == 0) {
    for (int i = 0; i < n; i++) {
      if (kill(parent, SIGUSR1) != 0) _exit(2);
      char c;
      if (read(ackp[0], &c, 1) != 1) _exit(3);
    }
    _exit(0);
  }
  int st;
  CHECK_EQ(waitpid(child, &st, 0), child);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
  CHECK_EQ(pthread_join(w, NULL), 0);
  atomic_store(&stop, 1);
  if (with_busy) CHECK_EQ(pthread_join(b, NULL), 0);
  CHECK_EQ(atomic_load(&handled), n);
  close(ackp[0]);
  close(ackp[1]);
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  /* Every thread blocks SIGUSR1; the suspender opens it only in sigsuspend. */
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &set, NULL), 0);

  in_process(1, 3000);
  printf("pthread_kill to a thread looping on sigsuspend: every handler ran once\n");
  in_process(0, 3000);
  printf("kill() from another thread: every handler ran once\n");
  from_child(3000, 0);
  printf("kill() from a child process: every handler ran once\n");
  from_child(300, 1);
  printf("the same beside a spinning thread: every handler ran once\n");
  CHECK_EQ(atomic_load(&wrong), 0);
  return 0;
}
