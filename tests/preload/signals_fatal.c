/* Default actions, signals during a handler and across fork, as natively:
 *   1. SIGINT / SIGTERM without a handler kill the process (WIFSIGNALED,
 *      WTERMSIG) when every thread is parked (main in pthread_join, a
 *      thread in read), and when only a parked thread leaves the signal
 *      unblocked (main and a busy thread block it);
 *   2. while a handler runs (blocked in read inside it), the same signal
 *      sent twice stays pending and is delivered once after it returns, and
 *      another signal runs nested on that thread;
 *   3. a forked child does not inherit the signals pending in the parent
 *      (held there because every thread blocked them), the parent still
 *      gets them. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static void nap(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- 1. default actions ---------------------------------------------- */

static int rpipe[2], ready[2];
static atomic_int stop;

static void *reader(void *arg) {
  if (arg) { /* the only thread that takes the signal */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
  }
  char c;
  int tid = self_tid(); /* the parent signals once this thread sleeps in its read */
  if (write(ready[1], &tid, sizeof tid) != sizeof tid) _exit(12);
  read(rpipe[0], &c, 1);
  return NULL;
}

static void *busy(void *arg) {
  volatile unsigned long c = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) c++;
  return NULL;
}

static int fatal_child(int blocked_elsewhere) {
  if (pipe(rpipe)) return 10;
  if (blocked_elsewhere) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
  }
  pthread_t t, b;
  if (blocked_elsewhere) pthread_create(&b, NULL, busy, NULL);
  pthread_create(&t, NULL, reader, blocked_elsewhere ? (void *)1 : NULL);
  pthread_join(t, NULL); /* main parks too */
  return 20;             /* the signal did not kill the process */
}

static void test_default(void) {
  int sigs[2] = {SIGINT, SIGTERM};
  for (int s = 0; s < 2; s++) {
    for (int blocked = 0; blocked <= 1; blocked++) {
      CHECK_EQ(pipe(ready), 0);
      pid_t pid = fork();
      CHECK(pid >= 0, "fork");
      if (pid == 0) _exit(fatal_child(blocked));
      int tid;
      CHECK_EQ(read(ready[0], &tid, sizeof tid), sizeof tid);
      if (blocked)
        wait_task_asleep(pid, tid); /* the reader is in read, the busy thread runs */
      else
        wait_all_asleep(pid); /* main in pthread_join, the reader in read */
      CHECK_EQ(kill(pid, sigs[s]), 0);
      int st;
      CHECK_EQ(waitpid(pid, &st, 0), pid);
      CHECK(WIFSIGNALED(st) && WTERMSIG(st) == sigs[s], "signal %d blocked elsewhere %d: status %#x",
            sigs[s], blocked, st);
      printf("default action of %s (blocked elsewhere: %d): killed by it\n",
             sigs[s] == SIGINT ? "SIGINT" : "SIGTERM", blocked);
      close(ready[0]);
      close(ready[1]);
    }
  }
}

/* ---- 2. signals during a handler ----------------------------------------- */

static int hpipe[2], gopipe[2], n2pipe[2], stoppipe[2];
static atomic_int target_tid;
static atomic_int n_usr1, n_usr2, usr2_nested;
static atomic_int in_usr1;
static pthread_t target_t;
static atomic_int wrong_thread;

static void on_usr1(int sig) {
  if (!pthread_equal(pthread_self(), target_t)) atomic_store(&wrong_thread, 1);
  int first = atomic_fetch_add(&n_usr1, 1) == 0;
  if (!first) return;
  atomic_store(&in_usr1, 1);
  if (write(hpipe[1], "h", 1) != 1) _exit(13);
  char c;
  ssize_t n;
  do
    n = read(gopipe[0], &c, 1); /* SA_RESTART: restarted after the nested handler */
  while (n < 0 && errno == EINTR);
  atomic_store(&in_usr1, 0);
}

static void on_usr2(int sig) {
  if (!pthread_equal(pthread_self(), target_t)) atomic_store(&wrong_thread, 1);
  if (atomic_load(&in_usr1)) atomic_fetch_add(&usr2_nested, 1);
  atomic_fetch_add(&n_usr2, 1);
  if (write(n2pipe[1], "2", 1) != 1) _exit(14); /* the sender waits for this */
}

static void *target(void *arg) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigaddset(&s, SIGUSR2);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
  atomic_store(&target_tid, self_tid());
  char c;
  ssize_t n;
  do /* until main writes a byte; handlers run here meanwhile */
    n = read(stoppipe[0], &c, 1);
  while (n < 0 && errno == EINTR);
  CHECK_EQ(n, 1);
  return NULL;
}

static void test_during_handler(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sa.sa_handler = on_usr1;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  sa.sa_handler = on_usr2;
  CHECK_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigaddset(&s, SIGUSR2);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  CHECK_EQ(pipe(hpipe), 0);
  CHECK_EQ(pipe(gopipe), 0);
  CHECK_EQ(pipe(n2pipe), 0);
  CHECK_EQ(pipe(stoppipe), 0);
  CHECK_EQ(pthread_create(&target_t, NULL, target, NULL), 0);
  /* The target has unblocked the signals and waits in its read. */
  wait_flag((const volatile int *)&target_tid);
  wait_tid_asleep(atomic_load(&target_tid), NULL);
  pid_t parent = getpid();
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    /* Another process: USR1, wait until its handler runs, then USR1 twice
       and USR2 while it runs, wait until USR2's handler ran (nested, in
       the USR1 handler's read), then let the USR1 handler return. */
    if (kill(parent, SIGUSR1)) _exit(1);
    char c;
    if (read(hpipe[0], &c, 1) != 1) _exit(2);
    kill(parent, SIGUSR1);
    kill(parent, SIGUSR1);
    kill(parent, SIGUSR2);
    if (read(n2pipe[0], &c, 1) != 1) _exit(4);
    if (write(gopipe[1], "g", 1) != 1) _exit(3);
    _exit(0);
  }
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sender status %#x", st);
  long long waited = 0;
  while (atomic_load(&n_usr1) < 2 && waited++ < 10000) nap(1);
  nap(100); /* a window: a wrong third USR1 would show below */
  CHECK_EQ(write(stoppipe[1], "s", 1), 1);
  CHECK_EQ(pthread_join(target_t, NULL), 0);
  close(n2pipe[0]);
  close(n2pipe[1]);
  close(stoppipe[0]);
  close(stoppipe[1]);
  CHECK_EQ(atomic_load(&wrong_thread), 0);
  CHECK_EQ(atomic_load(&n_usr1), 2); /* the two sent during the handler: one */
  CHECK_EQ(atomic_load(&n_usr2), 1);
  CHECK_EQ(atomic_load(&usr2_nested), 1);
  printf("during a handler: same signal once after it, another one nested\n");
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
  signal(SIGUSR1, SIG_DFL);
  signal(SIGUSR2, SIG_DFL);
}

/* ---- 3. pending signals and fork ------------------------------------------ */

static atomic_int n_fork_sig;
static void on_fork_sig(int sig, siginfo_t *si, void *uc) { atomic_fetch_add(&n_fork_sig, 1); }

static void test_fork_pending(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO;
  sa.sa_sigaction = on_fork_sig;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(sigaction(SIGRTMIN + 4, &sa, NULL), 0);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigaddset(&s, SIGRTMIN + 4);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  atomic_store(&stop, 0);
  pthread_t b;
  CHECK_EQ(pthread_create(&b, NULL, busy, NULL), 0); /* blocks them too */
  CHECK_EQ(kill(getpid(), SIGUSR1), 0);
  union sigval v = {.sival_int = 7};
  CHECK_EQ(sigqueue(getpid(), SIGRTMIN + 4, v), 0);
  CHECK_EQ(sigqueue(getpid(), SIGRTMIN + 4, v), 0);
  /* Both are pending in the process (every thread blocks them). */
  long long t0 = mono_ns_();
  for (;;) {
    sigset_t p;
    CHECK_EQ(sigpending(&p), 0);
    if (sigismember(&p, SIGUSR1) && sigismember(&p, SIGRTMIN + 4)) break;
    CHECK(mono_ns_() - t0 < 30000000000LL, "the signals sent are not pending");
    sched_yield();
  }
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    sigset_t p;
    sigpending(&p);
    if (sigismember(&p, SIGUSR1) || sigismember(&p, SIGRTMIN + 4)) _exit(1);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    nap(50); /* a window: a signal wrongly pending in the child would run */
    _exit(atomic_load(&n_fork_sig) == 0 ? 0 : 2);
  }
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child saw the parent's pending signals: status %#x",
        st);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
  CHECK_EQ(atomic_load(&n_fork_sig), 3);
  atomic_store(&stop, 1);
  CHECK_EQ(pthread_join(b, NULL), 0);
  printf("fork: the child starts with nothing pending, the parent keeps its signals\n");
}

int main(void) {
  test_default();
  test_during_handler();
  test_fork_pending();
  return 0;
}
