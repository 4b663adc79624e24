/* SIGINT and SIGTERM sent to the process, with and without handlers, while
 * it runs threads: the outcome (exit status, or death by the signal) is the
 * native one. Each case runs in a forked child. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

static volatile int stop;
static volatile sig_atomic_t got;
static int ready_pipe[2];

static void on_sig(int sig) { got = sig; }

static void *busy(void *arg) {
  while (!stop) sched_yield();
  return arg;
}

static void *blocked(void *arg) {
  char c;
  read(*(int *)arg, &c, 1);
  return arg;
}

static int child(int sig, int with_handler) {
  if (with_handler) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sigaction(sig, &sa, NULL);
  }
  int p[2];
  if (pipe(p)) return 10;
  pthread_t t[4];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, busy, NULL);
  pthread_create(&t[3], NULL, blocked, &p[0]);
  if (write(ready_pipe[1], "r", 1) != 1) return 11;
  while (!got) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  stop = 1;
  write(p[1], "x", 1);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  return 40 + got;
}

int main(void) {
  int sigs[2] = {SIGINT, SIGTERM};
  for (int s = 0; s < 2; s++) {
    for (int h = 0; h <= 1; h++) {
      CHECK_EQ(pipe(ready_pipe), 0);
      pid_t pid = fork();
      CHECK(pid >= 0, "fork");
      if (pid == 0) _exit(child(sigs[s], h));
      char c;
      CHECK_EQ(read(ready_pipe[0], &c, 1), 1);
      struct timespec ts = {0, 20 * 1000 * 1000};
      nanosleep(&ts, NULL);
      CHECK_EQ(kill(pid, sigs[s]), 0);
      int st;
      CHECK_EQ(waitpid(pid, &st, 0), pid);
      if (h)
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 40 + sigs[s], "handled %d: status %#x", sigs[s], st);
      else
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == sigs[s], "default %d: status %#x", sigs[s], st);
      close(ready_pipe[0]);
      close(ready_pipe[1]);
    }
  }
  printf("SIGINT and SIGTERM with and without handlers as natively\n");
  return 0;
}
