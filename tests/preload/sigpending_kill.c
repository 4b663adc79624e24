/* A thread that blocks SIGUSR1 and sends it to its own process with kill()
 * finds it in sigpending() as soon as kill() has returned (the kernel
 * queues it for the process before kill returns, and no thread can take
 * it: the only one blocks it), and its handler has run once sigprocmask
 * has unblocked it. stress-ng's sigpending stressor checks exactly this
 * ("did not get a SIGUSR1 pending signal"); under goshim another kernel
 * thread of the runtime could take the signal from the kernel and hold it
 * for goshim, and sigpending() looked between the two (a few times in a
 * million). The same from a second thread while the main thread sleeps in
 * a read, and with a real-time signal queued twice. */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include "common.h"

static volatile sig_atomic_t handled;
static void on_sig(int sig) {
  (void)sig;
  handled++;
}

static void rounds(const char *who, int sig, int per_round, int n) {
  sigset_t blk, none, pend;
  sigemptyset(&blk);
  sigaddset(&blk, sig);
  sigemptyset(&none);
  for (int i = 0; i < n; i++) {
    int before = handled;
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, &blk, NULL), 0);
    for (int k = 0; k < per_round; k++) CHECK_EQ(kill(getpid(), sig), 0);
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(sigismember(&pend, sig), "%s, round %d: signal %d sent with kill() while blocked is "
          "not pending", who, i, sig);
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, &none, NULL), 0);
    CHECK(handled == before + per_round, "%s, round %d: %d handlers ran after the unblock, "
          "%d expected", who, i, handled - before, per_round);
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(!sigismember(&pend, sig), "%s, round %d: still pending after its handler", who, i);
  }
}

static int n_rounds;
static void *second(void *arg) {
  rounds("a second thread", SIGUSR1, 1, n_rounds / 4);
  return arg;
}

int main(void) {
  n_rounds = env_int("ROUNDS", 300000);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sig;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(sigaction(SIGRTMIN + 1, &sa, NULL), 0);
  rounds("main", SIGUSR1, 1, n_rounds);
  rounds("main, real-time", SIGRTMIN + 1, 2, n_rounds / 4);
  /* The main thread blocks SIGUSR1 while the second thread runs its
     rounds, so that only the second one may take it. */
  sigset_t blk;
  sigemptyset(&blk);
  sigaddset(&blk, SIGUSR1);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &blk, NULL), 0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, second, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("sigpending saw every signal sent while blocked; each ran once unblocked\n");
  return 0;
}
