/* pidfd_send_signal() through a pidfd of the caller's own process, which
 * the calling thread leaves unblocked and no other thread exists to take:
 * for the kernel this is kill() of the own process, so the signal reaches
 * the calling thread before the call returns. Checked right after each
 * call, 100 rounds each, every round after 50 threads ran and were joined
 * (the caller has then usually moved to another kernel thread under M:N):
 * flags 0 (SI_USER from self), a siginfo (SI_QUEUE and its value), and
 * PIDFD_SIGNAL_THREAD_GROUP where the kernel has it (6.9). Errors: a closed
 * fd and a pipe are EBADF, an unknown flag EINVAL, signal 0 checks.
 * Exits 77 without pidfd_open (glibc before 2.36: no <sys/pidfd.h>; a kernel
 * before 5.3).
 * (goshim before pidfd_send_signal was interposed: the system call went
 * past goshim's kill path, and the kernel could give the signal to another
 * of goshim's kernel threads, which ran the handler after the call
 * returned.) */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include "common.h"

#if __has_include(<sys/pidfd.h>)
#include <sys/pidfd.h>

#define ROUNDS 100
#define NTHREADS 50
#ifndef PIDFD_SIGNAL_THREAD_GROUP
#define PIDFD_SIGNAL_THREAD_GROUP (1u << 1)
#endif

static volatile sig_atomic_t got, code, value, from;

static void on_sig(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  got = sig;
  code = si->si_code;
  value = si->si_code == SI_QUEUE ? si->si_value.sival_int : -1;
  from = si->si_pid == getpid();
}

int main(void) {
  int pfd = pidfd_open(getpid(), 0);
  if (pfd < 0) {
    fprintf(stderr, "pidfd_open: %s: cannot test\n", strerror(errno));
    return 77;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sig;
  sa.sa_flags = SA_SIGINFO;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(sigaction(SIGRTMIN + 3, &sa, NULL), 0);

  /* errors and signal 0 */
  int p[2];
  CHECK_EQ(pipe(p), 0);
  errno = 0;
  CHECK_EQ(pidfd_send_signal(p[0], SIGUSR1, NULL, 0), -1);
  CHECK_EQ(errno, EBADF);
  close(p[0]);
  close(p[1]);
  errno = 0;
  CHECK_EQ(pidfd_send_signal(p[0], SIGUSR1, NULL, 0), -1);
  CHECK_EQ(errno, EBADF);
  errno = 0;
  CHECK_EQ(pidfd_send_signal(pfd, SIGUSR1, NULL, 1u << 20), -1);
  CHECK_EQ(errno, EINVAL);
  got = 0;
  CHECK_EQ(pidfd_send_signal(pfd, 0, NULL, 0), 0);
  CHECK_EQ(got, 0);
  got = 0;
  int have_tg = pidfd_send_signal(pfd, 0, NULL, PIDFD_SIGNAL_THREAD_GROUP) == 0;
  CHECK_EQ(got, 0);

  for (int r = 0; r < ROUNDS; r++) {
    threads_churn(NTHREADS);
    got = 0;
    CHECK_EQ(pidfd_send_signal(pfd, SIGUSR1, NULL, 0), 0);
    CHECK(got == SIGUSR1, "round %d: pidfd_send_signal(SIGUSR1) returned before its handler ran", r);
    CHECK(code == SI_USER && from, "round %d: si_code %d, from self %d", r, (int)code, (int)from);

    threads_churn(NTHREADS);
    got = 0;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = SIGRTMIN + 3;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_int = r;
    CHECK_EQ(pidfd_send_signal(pfd, SIGRTMIN + 3, &si, 0), 0);
    CHECK(got == SIGRTMIN + 3, "round %d: pidfd_send_signal with a siginfo returned before its handler ran", r);
    CHECK(code == SI_QUEUE && value == r && from, "round %d: si_code %d value %d from self %d", r, (int)code,
          (int)value, (int)from);

    if (have_tg) {
      threads_churn(NTHREADS);
      got = 0;
      CHECK_EQ(pidfd_send_signal(pfd, SIGUSR1, NULL, PIDFD_SIGNAL_THREAD_GROUP), 0);
      CHECK(got == SIGUSR1, "round %d: pidfd_send_signal(PIDFD_SIGNAL_THREAD_GROUP) returned before its handler ran",
            r);
    }
  }
  close(pfd);
  printf("pidfd_send_signal to the own process delivered before returning, %d rounds\n", ROUNDS);
  return 0;
}

#else
int main(void) {
  fprintf(stderr, "no <sys/pidfd.h> (glibc before 2.36): cannot test\n");
  return 77;
}
#endif
