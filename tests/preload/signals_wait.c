/* Waiting for signals, with the signals sent by another process:
 *   1. sigwait, sigwaitinfo and sigtimedwait in a dedicated thread while
 *      every other thread (main, a busy one, a parked one) blocks the set:
 *      each signal is received once, with the sender's pid and value;
 *      sigtimedwait times out with EAGAIN when nothing comes; SIGINT left
 *      at its default action is received too (Ctrl-C taken by a thread);
 *   2. sigsuspend in a thread (the signal blocked everywhere else) returns
 *      EINTR after the handler ran on it, with its mask put back;
 *   3. pause in the only thread that leaves the signal open returns EINTR
 *      after the handler ran on it. */
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

static atomic_int stop;
static void *busy(void *arg) {
  volatile unsigned long c = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) c++;
  return NULL;
}
static int ppipe[2];
static void *parked(void *arg) {
  char c;
  return (void *)(long)read(ppipe[0], &c, 1);
}

/* A child process that sends what the parent asks for through a pipe:
   one command byte per signal: 'k' kill SIGUSR1, 'K' kill SIGUSR2,
   'q' sigqueue SIGRTMIN+5 (value: the next byte), 'T' kill SIGTERM,
   'x' exit. Each send is acknowledged with one byte. */
static int cmd[2], ack[2];
static pid_t sender;

static void sender_main(pid_t to) {
  char c;
  while (read(cmd[0], &c, 1) == 1) {
    union sigval v;
    switch (c) {
      case 'k':
        kill(to, SIGUSR1);
        break;
      case 'K':
        kill(to, SIGUSR2);
        break;
      case 'T':
        kill(to, SIGTERM);
        break;
      case 'I':
        kill(to, SIGINT);
        break;
      case 'q': {
        char val;
        if (read(cmd[0], &val, 1) != 1) _exit(2);
        v.sival_int = val;
        sigqueue(to, SIGRTMIN + 5, v);
        break;
      }
      case 'x':
        _exit(0);
    }
    if (write(ack[1], "a", 1) != 1) _exit(3);
  }
  _exit(1);
}

static void send_cmd(const char *s, int n) {
  CHECK_EQ(write(cmd[1], s, n), n);
  char a;
  CHECK_EQ(read(ack[0], &a, 1), 1);
}

static void start_sender(void) {
  CHECK_EQ(pipe(cmd), 0);
  CHECK_EQ(pipe(ack), 0);
  pid_t parent = getpid();
  sender = fork();
  CHECK(sender >= 0, "fork");
  if (sender == 0) sender_main(parent);
}

static void stop_sender(void) {
  CHECK_EQ(write(cmd[1], "x", 1), 1);
  int st;
  CHECK_EQ(waitpid(sender, &st, 0), sender);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sender status %#x", st);
}

/* ---- 1. the sigwait family ----------------------------------------------- */

static sigset_t wset;
static atomic_int step, got_sig, got_pid, got_val, got_err, waiter_tid;

static void *waiter(void *arg) {
  atomic_store(&waiter_tid, self_tid());
  /* step 1: sigwait */
  int sig = 0;
  CHECK_EQ(sigwait(&wset, &sig), 0);
  atomic_store(&got_sig, sig);
  atomic_store(&step, 1);
  /* step 2: sigwaitinfo */
  siginfo_t si;
  sig = sigwaitinfo(&wset, &si);
  atomic_store(&got_sig, sig);
  atomic_store(&got_pid, si.si_pid);
  atomic_store(&step, 2);
  /* step 3: sigtimedwait, a value */
  struct timespec ts = {20, 0};
  sig = sigtimedwait(&wset, &si, &ts);
  atomic_store(&got_sig, sig);
  atomic_store(&got_pid, si.si_pid);
  atomic_store(&got_val, si.si_code == SI_QUEUE ? si.si_value.sival_int : -1);
  atomic_store(&step, 3);
  /* step 4: sigtimedwait with nothing sent */
  struct timespec shortt = {0, 50 * 1000 * 1000};
  sig = sigtimedwait(&wset, &si, &shortt);
  atomic_store(&got_err, sig < 0 ? errno : 0);
  atomic_store(&step, 4);
  /* step 5: SIGINT at its default action (Ctrl-C handled by a thread) */
  CHECK_EQ(sigwait(&wset, &sig), 0);
  atomic_store(&got_sig, sig);
  atomic_store(&step, 5);
  return NULL;
}

static void wait_step(int n) {
  long long t = 0;
  while (atomic_load(&step) < n) {
    nap(1);
    CHECK(++t < 20000, "step %d not reached", n);
  }
}

/* Returns once the waiter sleeps in its next wait (each signal is sent
   while it waits; natively exact). */
static void waiter_asleep(void) {
  while (!atomic_load(&waiter_tid)) nap(1);
  wait_tid_asleep(atomic_load(&waiter_tid), NULL);
}

static void test_sigwait(void) {
  sigemptyset(&wset);
  sigaddset(&wset, SIGUSR1);
  sigaddset(&wset, SIGUSR2);
  sigaddset(&wset, SIGRTMIN + 5);
  sigaddset(&wset, SIGINT);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &wset, NULL), 0);
  CHECK_EQ(pipe(ppipe), 0);
  pthread_t b, p, w;
  CHECK_EQ(pthread_create(&b, NULL, busy, NULL), 0);
  CHECK_EQ(pthread_create(&p, NULL, parked, NULL), 0);
  CHECK_EQ(pthread_create(&w, NULL, waiter, NULL), 0);
  waiter_asleep();
  send_cmd("k", 1);
  wait_step(1);
  CHECK_EQ(atomic_load(&got_sig), SIGUSR1);
  waiter_asleep();
  send_cmd("K", 1);
  wait_step(2);
  CHECK_EQ(atomic_load(&got_sig), SIGUSR2);
  CHECK_EQ(atomic_load(&got_pid), sender);
  waiter_asleep();
  send_cmd("q\x2a", 2);
  wait_step(3);
  CHECK_EQ(atomic_load(&got_sig), SIGRTMIN + 5);
  CHECK_EQ(atomic_load(&got_pid), sender);
  CHECK_EQ(atomic_load(&got_val), 42);
  wait_step(4);
  CHECK_EQ(atomic_load(&got_err), EAGAIN);
  waiter_asleep();
  send_cmd("I", 1);
  wait_step(5);
  CHECK_EQ(atomic_load(&got_sig), SIGINT);
  CHECK_EQ(pthread_join(w, NULL), 0);
  sigset_t pend;
  CHECK_EQ(sigpending(&pend), 0);
  CHECK(!sigismember(&pend, SIGUSR1) && !sigismember(&pend, SIGUSR2), "left pending");
  atomic_store(&stop, 1);
  CHECK_EQ(write(ppipe[1], "x", 1), 1);
  CHECK_EQ(pthread_join(b, NULL), 0);
  CHECK_EQ(pthread_join(p, NULL), 0);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &wset, NULL), 0);
  printf("sigwait, sigwaitinfo, sigtimedwait: signals from another process, once each\n");
}

/* ---- 2. sigsuspend, 3. pause ---------------------------------------------- */

static pthread_t handler_expected;
static atomic_int handled, wrong_thread;
static void on_sig(int sig) {
  if (!pthread_equal(pthread_self(), handler_expected)) atomic_store(&wrong_thread, 1);
  atomic_fetch_add(&handled, 1);
}

static atomic_int susp_ready, susp_ret, susp_errno, susp_mask_ok;
static void *suspender(void *arg) {
  int use_pause = arg != NULL;
  if (use_pause) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
  }
  atomic_store(&susp_ready, self_tid()); /* just before the wait */
  int r;
  if (use_pause) {
    r = pause();
  } else {
    sigset_t none;
    sigemptyset(&none);
    r = sigsuspend(&none);
  }
  atomic_store(&susp_errno, errno);
  atomic_store(&susp_ret, r);
  sigset_t cur;
  pthread_sigmask(SIG_BLOCK, NULL, &cur);
  atomic_store(&susp_mask_ok, use_pause ? !sigismember(&cur, SIGTERM) : sigismember(&cur, SIGTERM));
  return NULL;
}

static void test_suspend(int use_pause) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sig;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGTERM, &sa, NULL), 0);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  atomic_store(&stop, 0);
  atomic_store(&handled, 0);
  atomic_store(&susp_ready, 0);
  pthread_t b, t;
  CHECK_EQ(pthread_create(&b, NULL, busy, NULL), 0);
  CHECK_EQ(pthread_create(&t, NULL, suspender, use_pause ? (void *)1 : NULL), 0);
  handler_expected = t;
  /* pause() would wait forever for a signal handled before it: send once
     the suspender sleeps in its call. */
  while (!atomic_load(&susp_ready)) nap(1);
  wait_tid_asleep(atomic_load(&susp_ready), NULL);
  send_cmd("T", 1);
  CHECK_EQ(pthread_join(t, NULL), 0);
  CHECK_EQ(atomic_load(&susp_ret), -1);
  CHECK_EQ(atomic_load(&susp_errno), EINTR);
  CHECK_EQ(atomic_load(&handled), 1);
  CHECK_EQ(atomic_load(&wrong_thread), 0);
  CHECK_EQ(atomic_load(&susp_mask_ok), 1);
  atomic_store(&stop, 1);
  CHECK_EQ(pthread_join(b, NULL), 0);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
  printf("%s: woken by a signal from another process, EINTR, handler on that thread\n",
         use_pause ? "pause" : "sigsuspend");
}

int main(void) {
  start_sender();
  test_sigwait();
  test_suspend(0);
  test_suspend(1);
  stop_sender();
  return 0;
}
