/* killpg() of a signal to the caller's own process group, with the caller
 * the only thread that leaves the signal unblocked: killpg(pg, sig) is
 * kill(-pg, sig) (POSIX), and a kill that reaches the caller's own process
 * delivers the signal to the calling thread before it returns when no other
 * thread can take it. Checked right after each call, every round after 50
 * threads ran and were joined (the caller has then usually moved to another
 * kernel thread under M:N):
 *   - killpg(getpgrp(), SIGUSR1) and killpg(0, SIGUSR1) from the main
 *     thread, 100 rounds each;
 *   - the same from a second thread while the main thread blocks SIGUSR1
 *     and waits in pthread_join, 50 rounds each;
 * and glibc's error contract: a negative group is EINVAL, signal 0 checks
 * existence, an invalid signal is EINVAL, a group that cannot exist is ESRCH.
 * The runner's process group holds timeout(1) as well, so the test runs in
 * a child that makes a session (and group) of its own with setsid().
 * (goshim before killpg was interposed: glibc's killpg calls its internal
 * __kill, so goshim's kill path was bypassed; the kernel could give the
 * signal to another of goshim's kernel threads and it reached the caller
 * after killpg returned: 4 rounds in 600 at 2 processors.) */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define ROUNDS 100
#define NTHREADS 50

static volatile sig_atomic_t got, code, from;

static void on_sig(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  got = sig;
  code = si->si_code;
  from = si->si_pid == getpid();
}

/* rounds of killpg(getpgrp()) and killpg(0) */
static void killpg_rounds(int n, const char *who) {
  for (int r = 0; r < n; r++) {
    threads_churn(NTHREADS);
    got = 0;
    CHECK_EQ(killpg(getpgrp(), SIGUSR1), 0);
    CHECK(got == SIGUSR1, "%s round %d: killpg(getpgrp(), SIGUSR1) returned before its handler ran", who, r);
    CHECK(code == SI_USER && from, "%s round %d: si_code %d, from self %d", who, r, (int)code, (int)from);

    threads_churn(NTHREADS);
    got = 0;
    CHECK_EQ(killpg(0, SIGUSR1), 0);
    CHECK(got == SIGUSR1, "%s round %d: killpg(0, SIGUSR1) returned before its handler ran", who, r);
    CHECK(code == SI_USER && from, "%s round %d: si_code %d, from self %d", who, r, (int)code, (int)from);
  }
}

static void *second_thread(void *arg) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
  killpg_rounds(ROUNDS / 2, "second thread");
  return arg;
}

static int child(void) {
  CHECK(setsid() == getpid(), "setsid: %s", strerror(errno));
  CHECK_EQ(getpgrp(), getpid());
  /* A bound for a hang (the parent's timeout does not reach a new group). */
  alarm(110);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sig;
  sa.sa_flags = SA_SIGINFO;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);

  /* glibc's error contract */
  errno = 0;
  CHECK_EQ(killpg(-1, SIGUSR1), -1);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK_EQ(killpg(-getpgrp(), 0), -1);
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(killpg(getpgrp(), 0), 0);
  CHECK_EQ(killpg(0, 0), 0);
  errno = 0;
  CHECK_EQ(killpg(getpgrp(), 65), -1);
  CHECK_EQ(errno, EINVAL);
  int pid_max = 0;
  FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
  CHECK(f && fscanf(f, "%d", &pid_max) == 1 && pid_max > 1, "cannot read pid_max");
  fclose(f);
  errno = 0;
  CHECK_EQ(killpg(pid_max, 0), -1); /* no process has a pid (or group) of pid_max */
  CHECK_EQ(errno, ESRCH);
  got = 0;
  CHECK_EQ(killpg(0, 0), 0);
  CHECK_EQ(got, 0);

  killpg_rounds(ROUNDS, "main thread");

  sigset_t s, old;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, &old), 0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, second_thread, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  sigset_t pend;
  CHECK_EQ(sigpending(&pend), 0);
  CHECK(!sigismember(&pend, SIGUSR1), "SIGUSR1 pending on the main thread");
  CHECK_EQ(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);

  printf("killpg to the own group delivered before returning, %d + %d rounds of 2 calls\n", ROUNDS, ROUNDS / 2);
  fflush(stdout);
  return 0;
}

int main(void) {
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) exit(child());
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st), "child killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
  return WEXITSTATUS(st);
}
