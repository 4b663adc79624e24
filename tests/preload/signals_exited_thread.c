/* Signals to a thread that has exited but is not joined yet, as glibc:
 * pthread_sigqueue returns ESRCH (its tid is 0 by then), pthread_kill
 * returns 0 and sends nothing. Sent anyway, real-time instances stayed
 * queued on the dead thread and counted against RLIMIT_SIGPENDING: with
 * the limit then lowered to the user's count + 5, five pthread_sigqueue
 * calls to the (blocking) main thread must still succeed. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static void *quit(void *arg) { return arg; }

int main(void) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGRTMIN);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, quit, NULL), 0);
  /* Until it has exited (bounded: 20 s). */
  union sigval v = {.sival_int = 7};
  int r;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while ((r = pthread_sigqueue(t, SIGRTMIN, v)) == 0) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    CHECK(now.tv_sec - start.tv_sec < 20, "pthread_sigqueue to the exited thread never returned ESRCH");
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  CHECK(r == ESRCH, "pthread_sigqueue to the exited thread: %d", r);
  for (int i = 0; i < 100; i++) {
    CHECK_EQ(pthread_sigqueue(t, SIGRTMIN, v), ESRCH);
    CHECK_EQ(pthread_kill(t, SIGRTMIN + 1), 0);
    CHECK_EQ(pthread_kill(t, 0), 0);
  }
  CHECK_EQ(pthread_join(t, NULL), 0);
  /* Nothing of those sends is held anywhere: room for 5 more. */
  sigset_t all;
  sigfillset(&all);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &all, NULL), 0);
  long q = self_status("SigQ:");
  CHECK(q >= 0, "SigQ unreadable");
  struct rlimit old, rl;
  CHECK_EQ(getrlimit(RLIMIT_SIGPENDING, &old), 0);
  rl.rlim_cur = (rlim_t)q + 5;
  rl.rlim_max = old.rlim_max;
  CHECK_EQ(setrlimit(RLIMIT_SIGPENDING, &rl), 0);
  for (int i = 0; i < 5; i++) {
    r = pthread_sigqueue(pthread_self(), SIGRTMIN + 2, v);
    CHECK(r == 0, "send %d of 5 to main under a limit of the count + 5: %d", i + 1, r);
  }
  for (int i = 0; i < 5; i++) {
    siginfo_t si;
    sigset_t w;
    sigemptyset(&w);
    sigaddset(&w, SIGRTMIN + 2);
    CHECK_EQ(sigwaitinfo(&w, &si), SIGRTMIN + 2);
  }
  CHECK_EQ(setrlimit(RLIMIT_SIGPENDING, &old), 0);
  printf("ok\n");
  return 0;
}
