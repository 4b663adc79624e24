/* A thread waiting in sigsuspend (or sigwaitinfo) is interrupted by a
 * handler that siglongjmps out of the wait; the thread lives on, blocking
 * SIGUSR1 (in read() on a pipe). Then the process sends itself SIGUSR1,
 * which every thread blocks: it is pending for the process and main takes
 * it with sigtimedwait, as natively. A threading layer that kept the
 * jumped-out thread listed as waiting handed SIGUSR1 to it, where nobody
 * takes it: main's wait timed out. 20 rounds each way. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

enum { ROUNDS = 20 };

static __thread sigjmp_buf jb;
static int use_sigwaitinfo;
static int ready[2], gone[2];

static void on_usr2(int sig) {
  (void)sig;
  siglongjmp(jb, 1);
}

static void *waiter(void *arg) {
  (void)arg;
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  if (sigsetjmp(jb, 1)) {
    /* Out of the wait; the saved mask blocks SIGUSR1 and SIGUSR2 again. */
    CHECK_EQ(write(ready[1], "j", 1), 1);
    char c;
    CHECK_EQ(read(gone[0], &c, 1), 1);
    return NULL;
  }
  CHECK_EQ(write(ready[1], "w", 1), 1);
  if (use_sigwaitinfo) {
    /* SIGUSR2 opened only now: its handler runs inside the wait or just
     * before it (then the wait is never entered; nothing to check). */
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &usr2, NULL), 0);
    siginfo_t si;
    int r = sigwaitinfo(&usr1, &si);
    CHECK(0, "sigwaitinfo returned %d (errno %d) instead of the handler's jump", r, errno);
  } else {
    /* SIGUSR2 can arrive only inside sigsuspend; SIGUSR1 is open there. */
    sigset_t m;
    sigfillset(&m);
    sigdelset(&m, SIGUSR2);
    sigdelset(&m, SIGUSR1);
    sigsuspend(&m);
    CHECK(0, "sigsuspend returned without the handler's jump");
  }
  return NULL;
}

static void on_usr1(int sig) {
  (void)sig;
  static const char m[] = "FAIL: SIGUSR1's handler ran (every thread blocks it outside sigsuspend)\n";
  if (write(2, m, sizeof m - 1) < 0) _exit(3);
  _exit(1);
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr2;
  CHECK_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
  sa.sa_handler = on_usr1;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigaddset(&s, SIGUSR2);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  for (use_sigwaitinfo = 0; use_sigwaitinfo < 2; use_sigwaitinfo++) {
    for (int i = 0; i < ROUNDS; i++) {
      CHECK_EQ(pipe(ready), 0);
      CHECK_EQ(pipe(gone), 0);
      pthread_t t;
      CHECK_EQ(pthread_create(&t, NULL, waiter, NULL), 0);
      char c;
      CHECK_EQ(read(ready[0], &c, 1), 1);
      CHECK_EQ(c, 'w');
      CHECK_EQ(pthread_kill(t, SIGUSR2), 0);
      CHECK_EQ(read(ready[0], &c, 1), 1);
      CHECK_EQ(c, 'j');
      CHECK_EQ(kill(getpid(), SIGUSR1), 0);
      struct timespec ten = {10, 0};
      siginfo_t si;
      int r = sigtimedwait(&usr1, &si, &ten);
      CHECK(r == SIGUSR1, "%s round %d: main's sigtimedwait got %d (errno %d), not the SIGUSR1 sent to the process",
            use_sigwaitinfo ? "sigwaitinfo" : "sigsuspend", i, r, errno);
      CHECK(si.si_code == SI_USER && si.si_pid == getpid(), "siginfo code %d pid %d", si.si_code,
            (int)si.si_pid);
      CHECK_EQ(write(gone[1], "x", 1), 1);
      CHECK_EQ(pthread_join(t, NULL), 0);
      close(ready[0]);
      close(ready[1]);
      close(gone[0]);
      close(gone[1]);
    }
  }
  printf("ok: %d rounds each of sigsuspend and sigwaitinfo left by siglongjmp\n", ROUNDS);
  return 0;
}
