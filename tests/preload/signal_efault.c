/* The signal calls given an address that is not mapped answer EFAULT, as
 * the kernel does, and do not crash the caller: sigpending, sigaltstack and
 * pthread_sigmask through libc, and through syscall() rt_sigprocmask (the
 * new set and the old one), rt_sigpending, rt_sigaction (the new action and
 * the old one), rt_sigsuspend, rt_sigtimedwait and sigaltstack; from main
 * and from a second thread (LTP's rt_sigpending02 and rt_sigaction02 pass
 * such addresses). Also tgkill with a tgid <= 0: EINVAL. Each result line
 * must be the same natively. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"

#define BAD ((void *)16) /* never mapped: below mmap_min_addr */

static void on_usr1(int s) { (void)s; }

static void report(const char *what, long r) {
  printf("%-40s r=%ld errno=%s\n", what, r, r < 0 ? strerror(errno) : "-");
}

static void round_of_calls(const char *who) {
  printf("-- %s\n", who);
  sigset_t s;
  sigemptyset(&s);
  uint64_t k = 0;
  errno = 0;
  report("sigpending(bad)", sigpending(BAD));
  report("sigaltstack(bad, NULL)", sigaltstack(BAD, NULL));
  report("sigaltstack(NULL, bad)", sigaltstack(NULL, BAD));
  report("syscall rt_sigprocmask(set bad)", syscall(SYS_rt_sigprocmask, SIG_BLOCK, BAD, NULL, 8));
  report("syscall rt_sigprocmask(old bad)", syscall(SYS_rt_sigprocmask, SIG_BLOCK, &k, BAD, 8));
  report("syscall rt_sigpending(bad)", syscall(SYS_rt_sigpending, BAD, 8));
  report("syscall rt_sigaction(act bad)", syscall(SYS_rt_sigaction, SIGUSR2, BAD, NULL, 8));
  report("syscall rt_sigaction(old bad)", syscall(SYS_rt_sigaction, SIGUSR2, NULL, BAD, 8));
  report("syscall rt_sigsuspend(bad)", syscall(SYS_rt_sigsuspend, BAD, 8));
  struct timespec zero = {0, 0};
  report("syscall rt_sigtimedwait(set bad)", syscall(SYS_rt_sigtimedwait, BAD, NULL, &zero, 8));
  report("syscall rt_sigtimedwait(ts bad)", syscall(SYS_rt_sigtimedwait, &k, NULL, BAD, 8));
  report("syscall sigaltstack(bad)", syscall(SYS_sigaltstack, BAD, NULL));
  report("tgkill(-1, self, SIGUSR1)", syscall(SYS_tgkill, -1, (long)syscall(SYS_gettid), SIGUSR1));
  report("tgkill(0, self, SIGUSR1)", syscall(SYS_tgkill, 0, (long)syscall(SYS_gettid), SIGUSR1));
  /* still working afterwards */
  CHECK_EQ(pthread_sigmask(SIG_SETMASK, NULL, &s), 0);
  CHECK(!sigismember(&s, SIGUSR1), "SIGUSR1 blocked after the calls");
}

static void *second(void *arg) {
  round_of_calls("second thread");
  return arg;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  round_of_calls("main thread");
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, second, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  return 0;
}
