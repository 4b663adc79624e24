/* The SIGPIPE-suppression idiom (block SIGPIPE, a write to a pipe whose
 * reader is gone fails with EPIPE, sigpending shows SIGPIPE, a
 * zero-timeout sigtimedwait takes it) in a process whose
 * /proc/self/task/TID/status is long: 3,000 supplementary groups make its
 * Groups: line about 24 KB, so SigPnd: comes after it. The write is
 * stdio's (glibc's own write: a threading layer sees only the signal).
 * From main and from a second thread, 50 times each. Needs CAP_SETGID
 * (exit 77 otherwise). */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

enum { NGROUPS = 3000, ROUNDS = 50 };

static void one(const char *who, int round) {
  int fd[2];
  CHECK_EQ(pipe(fd), 0);
  CHECK_EQ(close(fd[0]), 0);
  sigset_t s, pend;
  sigemptyset(&s);
  sigaddset(&s, SIGPIPE);
  FILE *f = fdopen(fd[1], "w");
  CHECK(f != NULL, "fdopen");
  setvbuf(f, NULL, _IONBF, 0);
  errno = 0;
  CHECK(fputc('x', f) == EOF && errno == EPIPE, "%s round %d: stdio write: errno %d", who, round,
        errno);
  fclose(f);
  CHECK_EQ(sigpending(&pend), 0);
  CHECK(sigismember(&pend, SIGPIPE), "%s round %d: SIGPIPE not pending after EPIPE", who, round);
  struct timespec z = {0, 0};
  siginfo_t si;
  int sig = sigtimedwait(&s, &si, &z);
  CHECK(sig == SIGPIPE, "%s round %d: the pending SIGPIPE could not be taken (%d, errno %d)", who,
        round, sig, errno);
  CHECK(si.si_code == SI_USER && si.si_pid == getpid(), "%s round %d: siginfo code %d pid %d", who,
        round, si.si_code, (int)si.si_pid);
  CHECK_EQ(sigpending(&pend), 0);
  CHECK(!sigismember(&pend, SIGPIPE), "%s round %d: SIGPIPE still pending after it was taken", who,
        round);
}

static void *run(void *arg) {
  for (int i = 0; i < ROUNDS; i++) one(arg, i);
  return NULL;
}

int main(void) {
  static gid_t groups[NGROUPS];
  for (int i = 0; i < NGROUPS; i++) groups[i] = 1000000 + (gid_t)i;
  if (setgroups(NGROUPS, groups) != 0) {
    printf("SKIP: setgroups of %d groups: %s\n", NGROUPS, strerror(errno));
    return 77;
  }
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGPIPE);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  run("main");
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, run, "thread"), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("ok: %d rounds from main and from a thread\n", ROUNDS);
  return 0;
}
