/* A process-directed signal that a sigwait did not return stays pending
 * for the process: another thread that waits for it gets it. Every thread
 * blocks the signals. In each round thread A waits for a thread-directed
 * signal (sent to it with pthread_sigqueue) and a process-directed one
 * (kill or sigqueue to the process), both sent while it waits; the kernel
 * dequeues a thread's own pending signals first, so A's sigwaitinfo
 * returns the thread-directed one and the process-directed one stays
 * pending for the process. A then blocks in a read without waiting for
 * signals, and the main thread takes the process-directed one with a
 * zero-timeout sigtimedwait loop (bounded) or, failing that, a long one.
 *   1. SIGUSR1 by kill;
 *   2. SIGRTMIN+1 by sigqueue (its value checked), with SIGRTMIN+2
 *      instances queued to the process behind it, taken in order.
 * goshim handed the process signal to A while A waited and left it there
 * when A's wait returned the other one: the main thread never got it
 * (and, with the kernel's newer instances behind it, a zero-timeout
 * sigtimedwait of a thread waiting for a higher signal spun for seconds
 * per call: review_sq27 H1). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static int go[2], ack[2];
static int thr_sig, proc_sig;
static pthread_t a;

static void *thread_a(void *arg) {
  (void)arg;
  sigset_t s;
  sigemptyset(&s);
  for (;;) {
    char c;
    CHECK_EQ(read(go[0], &c, 1), 1);
    if (c == 'q') return NULL;
    sigemptyset(&s);
    sigaddset(&s, thr_sig);
    sigaddset(&s, proc_sig);
    CHECK_EQ(write(ack[1], "w", 1), 1); /* about to wait */
    siginfo_t si;
    int r = sigwaitinfo(&s, &si);
    CHECK(r == thr_sig, "thread A's sigwaitinfo returned %d, not the thread-directed %d", r, thr_sig);
    CHECK_EQ(si.si_code, SI_QUEUE);
    CHECK_EQ(write(ack[1], "t", 1), 1);
  }
}

/* Takes sig (process-directed) on the calling thread, which blocks it:
   a zero-timeout loop first (natively the first call finds it), then a
   long wait so that a lost signal fails here rather than hanging. */
static int take_proc(int sig, siginfo_t *si) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, sig);
  struct timespec zero = {0, 0};
  for (int i = 0; i < 1000; i++) {
    int r = sigtimedwait(&s, si, &zero);
    if (r == sig) return r;
    CHECK(r == -1 && errno == EAGAIN, "sigtimedwait: %d errno %d", r, errno);
  }
  struct timespec ten = {10, 0};
  return sigtimedwait(&s, si, &ten);
}

static void rounds(int n, int tsig, int psig, int extra) {
  thr_sig = tsig;
  proc_sig = psig;
  for (int i = 0; i < n; i++) {
    char c;
    CHECK_EQ(write(go[1], "g", 1), 1);
    CHECK_EQ(read(ack[0], &c, 1), 1);
    CHECK_EQ(c, 'w');
    union sigval v = {.sival_int = i};
    CHECK_EQ(pthread_sigqueue(a, tsig, v), 0);
    if (psig == SIGUSR1)
      CHECK_EQ(kill(getpid(), psig), 0);
    else
      CHECK_EQ(sigqueue(getpid(), psig, v), 0);
    for (int k = 0; k < extra; k++) {
      union sigval w = {.sival_int = 1000 + k};
      CHECK_EQ(sigqueue(getpid(), psig + 1, w), 0);
    }
    CHECK_EQ(read(ack[0], &c, 1), 1); /* A took the thread-directed one and blocks in read */
    CHECK_EQ(c, 't');
    siginfo_t si;
    int r = take_proc(psig, &si);
    CHECK(r == psig, "round %d: the process-directed signal %d left pending was not received (%d)", i, psig, r);
    if (psig != SIGUSR1) CHECK_EQ(si.si_value.sival_int, i);
    for (int k = 0; k < extra; k++) {
      r = take_proc(psig + 1, &si);
      CHECK(r == psig + 1, "round %d: instance %d of %d not received (%d)", i, k, psig + 1, r);
      CHECK_EQ(si.si_value.sival_int, 1000 + k);
    }
  }
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  int n = env_int("ROUNDS", 300);
  sigset_t b;
  sigemptyset(&b);
  sigaddset(&b, SIGUSR1);
  sigaddset(&b, SIGRTMIN);
  sigaddset(&b, SIGRTMIN + 1);
  sigaddset(&b, SIGRTMIN + 2);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &b, NULL), 0);
  CHECK_EQ(pipe(go), 0);
  CHECK_EQ(pipe(ack), 0);
  CHECK_EQ(pthread_create(&a, NULL, thread_a, NULL), 0);

  rounds(n, SIGRTMIN, SIGUSR1, 0);
  printf("kill: the process-directed SIGUSR1 a sigwait left is received by another thread\n");
  rounds(n, SIGRTMIN, SIGRTMIN + 1, 3);
  printf("sigqueue: the process-directed SIGRTMIN+1 a sigwait left is received by another thread, in order\n");

  CHECK_EQ(write(go[1], "q", 1), 1);
  CHECK_EQ(pthread_join(a, NULL), 0);
  sigset_t p;
  CHECK_EQ(sigpending(&p), 0);
  CHECK(!sigismember(&p, SIGUSR1) && !sigismember(&p, SIGRTMIN) && !sigismember(&p, SIGRTMIN + 1) &&
            !sigismember(&p, SIGRTMIN + 2),
        "signals left pending");
  return 0;
}
