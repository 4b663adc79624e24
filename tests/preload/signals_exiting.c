/* Process-directed real-time signals while the only threads that take them
 * keep exiting: another process queues 300 SIGRTMIN signals (sigqueue, each
 * with its number), main blocks the signal, and short-lived threads that
 * unblock it compute for a moment and exit, wave after wave. A signal
 * pending for the process when the thread chosen for it exits goes to
 * another thread (Linux keeps it in the process's queue): every one of the
 * 300 reaches the handler exactly once. A last thread, started with the
 * signal open, collects what is still pending at the end. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define K 300

static volatile sig_atomic_t seen[K];
static volatile sig_atomic_t bad, bad_code, bad_value, bad_pid;
static volatile int sender_done;

static void on_rt(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  int v = si->si_value.sival_int;
  if (v < 0 || v >= K || si->si_code != SI_QUEUE) {
    bad = 1;
    bad_code = si->si_code;
    bad_value = v;
    bad_pid = si->si_pid;
  }
  else
    seen[v]++;
}

static void *taker(void *arg) {
  (void)arg;
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGRTMIN);
  pthread_sigmask(SIG_UNBLOCK, &s, NULL);
  volatile unsigned long x = 0;
  for (int i = 0; i < 20000; i++) x += i; /* a moment of work, no calls */
  return NULL;
}

/* Started with the signal already open (pthread_attr_setsigmask_np): it
 * takes what is pending without unblocking anything itself, and returns
 * once nothing is pending any more. */
static void *last_taker(void *arg) {
  (void)arg;
  long long t0 = mono_ns_();
  for (;;) {
    sigset_t p;
    CHECK_EQ(sigpending(&p), 0);
    if (!sigismember(&p, SIGRTMIN)) break;
    CHECK(mono_ns_() - t0 < 30000000000LL, "SIGRTMIN still pending after 30 s");
    sched_yield();
  }
  return NULL;
}

int main(void) {
#if !__GLIBC_PREREQ(2, 32)
  /* Debian 11: glibc 2.31 has no pthread_attr_setsigmask_np. */
  fprintf(stderr, "needs glibc 2.32 (pthread_attr_setsigmask_np); this is %d.%d\n", __GLIBC__,
          __GLIBC_MINOR__);
  return 77;
#else
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_rt;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGRTMIN, &sa, NULL), 0);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGRTMIN);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);

  pid_t parent = getpid();
  int go[2];
  CHECK_EQ(pipe(go), 0);
  pid_t child = fork();
  CHECK(child >= 0, "fork");
  if (child == 0) {
    char c;
    if (read(go[0], &c, 1) != 1) _exit(3);
    for (int i = 0; i < K; i++) {
      union sigval v = {.sival_int = i};
      if (sigqueue(parent, SIGRTMIN, v) != 0) _exit(4);
      struct timespec ts = {0, 100 * 1000}; /* spread over many waves (no order) */
      nanosleep(&ts, NULL);
    }
    _exit(0);
  }
  CHECK_EQ(write(go[1], "g", 1), 1);
  int st, waves = 0;
  for (;;) {
    pthread_t t[8];
    for (int i = 0; i < 8; i++) CHECK_EQ(pthread_create(&t[i], NULL, taker, NULL), 0);
    for (int i = 0; i < 8; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
    waves++;
    pid_t w = waitpid(child, &st, WNOHANG);
    CHECK(w >= 0, "waitpid");
    if (w == child) break;
  }
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sender status %x", st);
  pthread_t last;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  sigset_t open;
  sigemptyset(&open);
  CHECK_EQ(pthread_attr_setsigmask_np(&attr, &open), 0);
  CHECK_EQ(pthread_create(&last, &attr, last_taker, NULL), 0);
  CHECK_EQ(pthread_join(last, NULL), 0);
  CHECK(!bad, "a signal with a wrong value or code: si_code %d, value %d, si_pid %d",
        (int)bad_code, (int)bad_value, (int)bad_pid);
  int missing = 0, twice = 0;
  for (int i = 0; i < K; i++) {
    if (seen[i] == 0) missing++;
    if (seen[i] > 1) twice++;
  }
  CHECK(missing == 0 && twice == 0, "%d of %d signals lost, %d delivered twice (%d waves)",
        missing, K, twice, waves);
  printf("signals_exiting: %d queued signals delivered once each\n", K);
  return 0;
#endif
}
