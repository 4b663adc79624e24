/* Signals to threads and to the process:
 *  - pthread_kill to a running, a parked and a sleeping thread runs the
 *    handler on that thread;
 *  - pthread_sigqueue carries its value;
 *  - sigwait in a dedicated thread, the signals blocked everywhere else,
 *    receives process-directed and thread-directed signals;
 *  - a read interrupted by a handler with SA_RESTART goes on, without it
 *    fails with EINTR; nanosleep returns EINTR with the time left;
 *  - new threads inherit the creator's signal mask. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static volatile pthread_t handled_on;
static volatile int handled, last_value;

static void on_usr1(int sig, siginfo_t *si, void *uc) {
  handled_on = pthread_self();
  last_value = si->si_code == SI_QUEUE ? si->si_value.sival_int : -1;
  __atomic_add_fetch(&handled, 1, __ATOMIC_SEQ_CST);
}

static void wait_handled(int n) {
  while (__atomic_load_n(&handled, __ATOMIC_SEQ_CST) < n) sched_yield();
}

static volatile int stop;

static void *runner(void *arg) {
  unsigned long c = 0;
  while (!stop) c++;
  return (void *)c;
}

static pthread_t joined;
static void *joinee(void *arg) {
  while (!stop) sched_yield();
  return arg;
}
static volatile int parked_tid, sleeper_tid, reader_tid; /* each set just before its call */
static void *parked(void *arg) {
  parked_tid = self_tid();
  CHECK_EQ(pthread_join(joined, NULL), 0); /* not interrupted: join never fails with EINTR */
  return arg;
}

static int slept[2]; /* the sleeper writes a byte here once its nanosleep returned */
static void *sleeper(void *arg) {
  struct timespec req = {30, 0}, rem = {0, 0};
  sleeper_tid = self_tid();
  int r = nanosleep(&req, &rem);
  int e = errno;
  CHECK_EQ(write(slept[1], "s", 1), 1);
  CHECK(r == -1 && e == EINTR, "nanosleep returned %d errno %d", r, e);
  CHECK(rem.tv_sec > 20 && rem.tv_sec <= 30, "remaining %ld s", (long)rem.tv_sec);
  return NULL;
}

static volatile int waiter_ready, got_usr2, got_usr1_count;
static void *sigwaiter(void *arg) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR2);
  sigaddset(&set, SIGWINCH);
  waiter_ready = 1;
  for (int i = 0; i < 6; i++) {
    int sig = 0;
    CHECK_EQ(sigwait(&set, &sig), 0);
    if (sig == SIGUSR2) got_usr2++;
    if (sig == SIGWINCH) got_usr1_count++;
  }
  return NULL;
}

static int rpipe[2];
static volatile int reader_done;
static void *reader(void *arg) {
  char buf[8];
  reader_tid = self_tid();
  ssize_t n = read(rpipe[0], buf, sizeof buf);
  reader_done = 1;
  return (void *)(n >= 0 ? n : -(long)errno);
}

static void on_usr2_plain(int sig) { __atomic_add_fetch(&handled, 1, __ATOMIC_SEQ_CST); }

static void *mask_child(void *arg) {
  sigset_t cur;
  pthread_sigmask(SIG_BLOCK, NULL, &cur);
  return (void *)(long)(sigismember(&cur, SIGTERM) * 2 + sigismember(&cur, SIGUSR1));
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_usr1;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);

  /* running */
  pthread_t r;
  CHECK_EQ(pthread_create(&r, NULL, runner, NULL), 0);
  for (int i = 0; i < 100; i++) sched_yield();
  CHECK_EQ(pthread_kill(r, SIGUSR1), 0);
  wait_handled(1);
  CHECK(pthread_equal(handled_on, r), "handler ran on another thread (running target)");
  /* queued value */
  union sigval v = {.sival_int = 4242};
  CHECK_EQ(pthread_sigqueue(r, SIGUSR1, v), 0);
  wait_handled(2);
  CHECK(pthread_equal(handled_on, r) && last_value == 4242, "sigqueue value %d", last_value);
  stop = 1;
  CHECK_EQ(pthread_join(r, NULL), 0);
  stop = 0;

  /* parked (in pthread_join) */
  pthread_t j, p;
  CHECK_EQ(pthread_create(&joined, NULL, joinee, NULL), 0);
  CHECK_EQ(pthread_create(&p, NULL, parked, NULL), 0);
  wait_flag(&parked_tid);
  wait_tid_asleep(parked_tid, NULL); /* in pthread_join */
  CHECK_EQ(pthread_kill(p, SIGUSR1), 0);
  wait_handled(3);
  CHECK(pthread_equal(handled_on, p), "handler ran on another thread (parked target)");
  stop = 1;
  CHECK_EQ(pthread_join(p, NULL), 0);
  (void)j;

  /* sleeping: EINTR with the time left. The first signal is sent once the
     sleeper's kernel thread sleeps (natively: inside nanosleep). A signal
     that came before would run its handler and leave the 30 s sleep to run
     out (possible under an M:N runtime), so the signal is sent again each
     time 100 ms pass without the sleep returning. */
  pthread_t s;
  CHECK_EQ(pipe(slept), 0);
  sleeper_tid = 0;
  CHECK_EQ(pthread_create(&s, NULL, sleeper, NULL), 0);
  wait_flag(&sleeper_tid);
  wait_tid_asleep(sleeper_tid, NULL);
  struct pollfd sp = {.fd = slept[0], .events = POLLIN};
  do CHECK_EQ(pthread_kill(s, SIGUSR1), 0);
  while (poll(&sp, 1, 100) == 0);
  CHECK_EQ(pthread_join(s, NULL), 0);
  CHECK(pthread_equal(handled_on, s), "handler ran on another thread (sleeping target)");
  close(slept[0]);
  close(slept[1]);
  struct timespec tiny = {0, 10 * 1000 * 1000};

  /* SA_RESTART: the read goes on; without it: EINTR. The first signal is
     sent once the reader sleeps (natively: in its read). Without
     SA_RESTART the signal is sent until the read returns (under an M:N
     runtime a copy may land before the read starts: it only runs the
     handler early); with it, 20 copies come before the data, each once
     the handler of the one before has run and the reader sleeps again,
     and the read returns the data. */
  for (int restart = 1; restart >= 0; restart--) {
    struct sigaction sb;
    memset(&sb, 0, sizeof sb);
    sb.sa_handler = on_usr2_plain;
    sb.sa_flags = restart ? SA_RESTART : 0;
    CHECK_EQ(sigaction(SIGUSR2, &sb, NULL), 0);
    CHECK_EQ(pipe(rpipe), 0);
    reader_done = 0;
    pthread_t rd;
    reader_tid = 0;
    CHECK_EQ(pthread_create(&rd, NULL, reader, NULL), 0);
    wait_flag(&reader_tid);
    wait_tid_asleep(reader_tid, &reader_done);
    for (int i = 0; (restart ? i < 20 : i < 6000) && !reader_done; i++) {
      if (restart) {
        int before = __atomic_load_n(&handled, __ATOMIC_SEQ_CST);
        CHECK_EQ(pthread_kill(rd, SIGUSR2), 0);
        long long t0 = mono_ns_();
        while (__atomic_load_n(&handled, __ATOMIC_SEQ_CST) == before) {
          CHECK(mono_ns_() - t0 < 30000000000LL, "the handler did not run");
          sched_yield();
        }
        wait_tid_asleep(reader_tid, &reader_done); /* reading again */
      } else {
        CHECK_EQ(pthread_kill(rd, SIGUSR2), 0);
        nanosleep(&tiny, NULL); /* the pace of the copies */
      }
    }
    CHECK(restart || reader_done, "a read without SA_RESTART was not interrupted by 6,000 signals");
    CHECK(restart ? !reader_done : 1, "a read with SA_RESTART ended early");
    CHECK_EQ(write(rpipe[1], "abc", 3), 3);
    void *res;
    CHECK_EQ(pthread_join(rd, &res), 0);
    if (restart)
      CHECK((long)res == 3, "restarted read returned %ld", (long)res);
    else
      CHECK((long)res == -EINTR, "interrupted read returned %ld", (long)res);
    close(rpipe[0]);
    close(rpipe[1]);
  }

  /* sigwait: blocked everywhere (block before creating the threads) */
  signal(SIGUSR2, SIG_DFL);
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  sigaddset(&block, SIGWINCH);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &block, NULL), 0);
  pthread_t w, busy[3];
  stop = 0;
  for (int i = 0; i < 3; i++) CHECK_EQ(pthread_create(&busy[i], NULL, runner, NULL), 0);
  CHECK_EQ(pthread_create(&w, NULL, sigwaiter, NULL), 0);
  while (!waiter_ready) sched_yield();
  for (int i = 0; i < 3; i++) {
    int before = got_usr2;
    CHECK_EQ(kill(getpid(), SIGUSR2), 0); /* process-directed */
    while (got_usr2 == before) sched_yield();
  }
  for (int i = 0; i < 3; i++) {
    int before = got_usr1_count;
    CHECK_EQ(pthread_kill(w, SIGWINCH), 0); /* thread-directed */
    while (got_usr1_count == before) sched_yield();
  }
  CHECK_EQ(pthread_join(w, NULL), 0);
  stop = 1;
  for (int i = 0; i < 3; i++) CHECK_EQ(pthread_join(busy[i], NULL), 0);
  CHECK_EQ(got_usr2, 3);
  CHECK_EQ(got_usr1_count, 3);

  /* mask inheritance */
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, SIGTERM);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &m, NULL), 0);
  pthread_t mc;
  void *res;
  CHECK_EQ(pthread_create(&mc, NULL, mask_child, NULL), 0);
  CHECK_EQ(pthread_join(mc, &res), 0);
  CHECK_EQ((long)res, 2);
  printf("thread and process signals delivered as natively\n");
  return 0;
}
