/* A program started while its user's queue of pending signals is full
 * (RLIMIT_SIGPENDING reached: every real-time signal sent to it fails with
 * EAGAIN, a standard one is still marked pending) starts and runs its
 * threads as natively. The parent sets the limit to 0 and runs itself
 * again (exec keeps the limit); the child checks that the queue is full
 * for it (sigqueue fails with EAGAIN), then runs 200 threads alive at once
 * behind a barrier, a mutex they all count under, and a standard signal
 * to itself with a handler.
 * (goshim's start-up probe of glibc's cancellation protocol made SIGCANCEL,
 * a real-time signal, pending with tgkill and waited for it in sigsuspend:
 * with the queue full the tgkill failed and every program under goshim
 * slept there for ever, `timeout` of the test runner included.) */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define NTHREADS 200

static pthread_barrier_t bar;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long count;
static volatile sig_atomic_t got;

static void on_usr1(int sig) { got = sig; }

static void *worker(void *arg) {
  pthread_barrier_wait(&bar);
  for (int i = 0; i < 1000; i++) {
    pthread_mutex_lock(&mu);
    count++;
    pthread_mutex_unlock(&mu);
  }
  return arg;
}

static int child(void) {
  struct rlimit rl;
  CHECK_EQ(getrlimit(RLIMIT_SIGPENDING, &rl), 0);
  CHECK(rl.rlim_cur == 0, "RLIMIT_SIGPENDING %lu, expected 0", (unsigned long)rl.rlim_cur);
  union sigval sv = {.sival_int = 1};
  errno = 0;
  CHECK(sigqueue(getpid(), SIGRTMIN, sv) == -1 && errno == EAGAIN, "sigqueue with a full queue: errno %d", errno);
  printf("child: a real-time signal cannot be queued (EAGAIN)\n");

  CHECK_EQ(pthread_barrier_init(&bar, NULL, NTHREADS + 1), 0);
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) CHECK_EQ(pthread_create(&t[i], NULL, worker, NULL), 0);
  check_kernel_threads("200 threads alive");
  pthread_barrier_wait(&bar);
  for (int i = 0; i < NTHREADS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  CHECK_EQ(count, NTHREADS * 1000L);
  printf("child: %d threads counted %ld under one mutex\n", NTHREADS, count);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(kill(getpid(), SIGUSR1), 0);
  CHECK_EQ(got, SIGUSR1);
  printf("child: SIGUSR1 to itself ran its handler\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) return child();
  struct rlimit rl = {0, 0};
  CHECK_EQ(setrlimit(RLIMIT_SIGPENDING, &rl), 0);
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never left behind by a runner's timeout */
    execl("/proc/self/exe", argv[0], "child", (char *)NULL);
    _exit(127);
  }
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
  printf("started and ran with the signal queue full\n");
  return 0;
}
