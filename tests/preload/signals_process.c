/* SIGINT and SIGTERM sent to the process, with and without handlers, while
 * it runs threads: the outcome (exit status, or death by the signal) is the
 * native one. Each case runs in a forked child; the signal is sent once the
 * child's reading thread sleeps in its read (its busy threads run), and
 * the handler tells the child's main thread through a pipe. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

static volatile int stop;
static volatile sig_atomic_t got;
static int ready_pipe[2], got_pipe[2];

static void on_sig(int sig) {
  got = sig;
  if (write(got_pipe[1], "g", 1) != 1) _exit(12);
}

static void *busy(void *arg) {
  while (!stop) sched_yield();
  return arg;
}

static void *blocked(void *arg) {
  char c;
  int tid = self_tid();
  if (write(ready_pipe[1], &tid, sizeof tid) != sizeof tid) _exit(11);
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
  if (pipe(p) || pipe(got_pipe)) return 10;
  pthread_t t[4];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, busy, NULL);
  pthread_create(&t[3], NULL, blocked, &p[0]);
  char c;
  while (read(got_pipe[0], &c, 1) < 0 && errno == EINTR) {
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
      int tid;
      CHECK_EQ(read(ready_pipe[0], &tid, sizeof tid), sizeof tid);
      wait_task_asleep(pid, tid);
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
