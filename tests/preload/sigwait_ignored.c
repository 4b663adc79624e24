/* sigwait receives a signal the process ignores, as natively (a blocked
 * signal is never discarded, whatever its disposition):
 *   1. SIGCHLD at its default action (ignore) from a child that exits,
 *      received by sigwaitinfo with the child's pid and status;
 *   2. SIGINT at SIG_IGN (as a background job inherits it), sent by a child
 *      process with kill() while a thread waits for it in sigwaitinfo and
 *      the other threads (main, a spinning one) block it;
 *   3. SIGUSR2 at SIG_IGN set by the program, sent with kill() by the
 *      process itself;
 *   4. SIGWINCH at its default action, sent by a child process.
 * Each round repeats many times; a lost signal leaves the program waiting
 * forever (the runner's timeout). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

static sigset_t wset;
static int ready[2];  /* waiter -> main: about to wait */
static int done[2];   /* waiter -> main: the signal it received */

static void *waiter(void *arg) {
  int n = (int)(long)arg;
  for (int i = 0; i < n; i++) {
    CHECK_EQ(write(ready[1], "r", 1), 1);
    siginfo_t si;
    int sig = sigwaitinfo(&wset, &si);
    CHECK(sig > 0, "sigwaitinfo: %d errno %d", sig, errno);
    if (sig == SIGCHLD) {
      int st;
      CHECK_EQ(waitpid(si.si_pid, &st, 0), si.si_pid);
      CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7, "child status %#x", st);
      CHECK_EQ(si.si_code, CLD_EXITED);
    }
    unsigned char c = (unsigned char)sig;
    CHECK_EQ(write(done[1], &c, 1), 1);
  }
  return NULL;
}

static atomic_int stop;
static void *busy(void *arg) {
  volatile unsigned long c = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) c++;
  return NULL;
}

/* how: 'c' a child sends sig with kill(), 's' the process sends it to
   itself with kill(), 'x' a child exits (SIGCHLD). */
static void round_trip(int sig, char how, int n, int with_busy) {
  sigemptyset(&wset);
  sigaddset(&wset, sig);
  CHECK_EQ(pipe(ready), 0);
  CHECK_EQ(pipe(done), 0);
  pthread_t w, b;
  atomic_store(&stop, 0);
  if (with_busy) CHECK_EQ(pthread_create(&b, NULL, busy, NULL), 0);
  CHECK_EQ(pthread_create(&w, NULL, waiter, (void *)(long)n), 0);
  pid_t self = getpid();
  for (int i = 0; i < n; i++) {
    char c;
    CHECK_EQ(read(ready[0], &c, 1), 1);
    if (how == 's') {
      CHECK_EQ(kill(self, sig), 0);
    } else {
      pid_t child = fork();
      CHECK(child >= 0, "fork");
      if (child == 0) {
        if (how == 'x') _exit(7);
        _exit(kill(self, sig) == 0 ? 0 : 1);
      }
      if (how == 'c') {
        int st;
        CHECK_EQ(waitpid(child, &st, 0), child);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sender status %#x", st);
      }
    }
    unsigned char got;
    CHECK_EQ(read(done[0], &got, 1), 1);
    CHECK_EQ(got, sig);
  }
  CHECK_EQ(pthread_join(w, NULL), 0);
  atomic_store(&stop, 1);
  if (with_busy) CHECK_EQ(pthread_join(b, NULL), 0);
  close(ready[0]);
  close(ready[1]);
  close(done[0]);
  close(done[1]);
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  sigset_t all;
  sigemptyset(&all);
  sigaddset(&all, SIGINT);
  sigaddset(&all, SIGUSR2);
  sigaddset(&all, SIGCHLD);
  sigaddset(&all, SIGWINCH);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &all, NULL), 0);
  CHECK(signal(SIGINT, SIG_IGN) != SIG_ERR, "signal");
  CHECK(signal(SIGUSR2, SIG_IGN) != SIG_ERR, "signal");

  /* First, while no other child has existed: each SIGCHLD is this round's. */
  round_trip(SIGCHLD, 'x', 100, 0);
  printf("SIGCHLD at its default action: received by sigwaitinfo\n");
  round_trip(SIGINT, 'c', 20, 1);
  printf("SIGINT ignored, from a child process: received by sigwaitinfo\n");
  round_trip(SIGUSR2, 's', 500, 0);
  printf("SIGUSR2 ignored, from the process itself: received by sigwaitinfo\n");
  round_trip(SIGWINCH, 'c', 100, 0);
  printf("SIGWINCH at its default action, from a child process: received by sigwaitinfo\n");
  return 0;
}
