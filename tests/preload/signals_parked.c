/* Process-directed signals whose only taker is a parked thread: main and a
 * CPU-bound thread block SIGUSR1; one thread leaves it unblocked and waits
 * in read on a pipe, pthread_cond_wait, nanosleep, sleep, sem_wait or
 * pthread_join. kill(getpid(), SIGUSR1), or kill from another process, must
 * run the handler on that thread, and its call then behaves as on Linux:
 *   read, sem_wait: restarted with SA_RESTART, EINTR without;
 *   nanosleep, sleep: end early (EINTR, time left) either way;
 *   pthread_cond_wait, pthread_join: never fail (cond may wake spuriously).
 * The signal is first sent once the thread sleeps in the kernel (inside its
 * call natively); it is sent again if it landed before the call (possible
 * under an M:N runtime, where the published kernel thread may sleep or run
 * the sender without the thread being in its call yet). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

enum { K_READ, K_COND, K_NANOSLEEP, K_SLEEP, K_SEM, K_JOIN, K_COUNT };
static const char *kname[] = {"read", "cond_wait", "nanosleep", "sleep", "sem_wait", "join"};

static atomic_int handled;
static pthread_t handled_on;
static void on_usr1(int sig) {
  handled_on = pthread_self();
  atomic_fetch_add(&handled, 1);
}

static atomic_int stop_busy, done;
static atomic_int target_tid;
static int jfd[2]; /* the joinee lives until a byte (or EOF) arrives here */
static int kind;
static int pfd[2];
static sem_t sem;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag;
static pthread_t joinee_t;
static long result;
static int result_errno;

static void *busy(void *arg) {
  volatile unsigned long c = 0;
  while (!atomic_load_explicit(&stop_busy, memory_order_relaxed)) c++;
  return NULL;
}

static void *joinee(void *arg) {
  char c;
  while (read(jfd[0], &c, 1) < 0 && errno == EINTR) {
  }
  return NULL;
}

static void stop_joinee(void) { CHECK_EQ(write(jfd[1], "x", 1), 1); }

static void *target(void *arg) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
  atomic_store(&target_tid, self_tid());
  errno = 0;
  switch (kind) {
    case K_READ: {
      char c;
      result = read(pfd[0], &c, 1);
      break;
    }
    case K_COND:
      pthread_mutex_lock(&mu);
      while (!flag) CHECK_EQ(pthread_cond_wait(&cv, &mu), 0);
      pthread_mutex_unlock(&mu);
      result = 0;
      break;
    case K_NANOSLEEP: {
      struct timespec req = {30, 0}, rem = {0, 0};
      result = nanosleep(&req, &rem);
      if (result == 0) break;
      CHECK(rem.tv_sec > 0 && rem.tv_sec <= 30, "nanosleep rem %ld", (long)rem.tv_sec);
      break;
    }
    case K_SLEEP: {
      unsigned left = sleep(30);
      result = left > 0 && left <= 30 ? -1 : (long)left;
      if (result == -1) errno = EINTR;
      break;
    }
    case K_SEM:
      result = sem_wait(&sem);
      break;
    case K_JOIN:
      result = pthread_join(joinee_t, NULL);
      break;
  }
  result_errno = errno;
  atomic_store(&done, 1);
  return NULL;
}

static void nap(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Sends SIGUSR1 to this process, from itself or from a child process. */
static void send_usr1(int from_child) {
  if (!from_child) {
    CHECK_EQ(kill(getpid(), SIGUSR1), 0);
    return;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) _exit(kill(parent, SIGUSR1) == 0 ? 0 : 1);
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child kill: status %#x", st);
}

/* Interrupts the call until the handler has run during it; returns 1 if
   the call ended (interrupted), 0 if it went on after the handler. */
static int interrupt(pthread_t t, int expect_end, int from_child) {
  for (int tries = 0; tries < 50; tries++) {
    int before = atomic_load(&handled);
    send_usr1(from_child);
    long long t0 = now_ms();
    while (atomic_load(&handled) == before) {
      /* A signal sent again after the call ended (it ended late) may stay
         pending once the thread is gone: the call's end is the answer. */
      if (tries > 0 && atomic_load(&done)) return 1;
      nap(1);
      CHECK(now_ms() - t0 < 20000, "%s: the handler did not run within 20 s", kname[kind]);
    }
    CHECK(pthread_equal(handled_on, t), "%s: handler ran on another thread", kname[kind]);
    /* Give the call time to end if it is going to (a window: a call that
       wrongly ends later still prints a different result below). */
    t0 = now_ms();
    while (!atomic_load(&done) && now_ms() - t0 < 200) nap(1);
    if (atomic_load(&done)) return 1;
    if (!expect_end) return 0;
  }
  CHECK(0, "%s: never interrupted", kname[kind]);
  return 0;
}

static void run_case(int k, int restart, int from_child) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  kind = k;
  atomic_store(&target_tid, 0);
  atomic_store(&done, 0);
  flag = 0;
  CHECK_EQ(pipe(pfd), 0);
  CHECK_EQ(pipe(jfd), 0);
  CHECK_EQ(sem_init(&sem, 0, 0), 0);
  if (k == K_JOIN) CHECK_EQ(pthread_create(&joinee_t, NULL, joinee, NULL), 0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, target, NULL), 0);
  while (!atomic_load(&target_tid)) nap(1);
  wait_tid_asleep(atomic_load(&target_tid), (const volatile int *)&done);
  /* Which calls end: those never restarted, and the restartable ones
     without SA_RESTART. */
  int expect_end = k == K_NANOSLEEP || k == K_SLEEP || (!restart && (k == K_READ || k == K_SEM));
  int ended = interrupt(t, expect_end, from_child);
  CHECK(ended == expect_end, "%s restart=%d: call %s after the handler", kname[k], restart,
        ended ? "ended" : "went on");
  if (!ended) {
    /* Let it finish normally. */
    switch (k) {
      case K_READ:
        CHECK_EQ(write(pfd[1], "x", 1), 1);
        break;
      case K_COND:
        pthread_mutex_lock(&mu);
        flag = 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
        break;
      case K_SEM:
        CHECK_EQ(sem_post(&sem), 0);
        break;
      case K_JOIN:
        stop_joinee();
        break;
    }
  }
  CHECK_EQ(pthread_join(t, NULL), 0);
  if (k == K_JOIN && ended) {
    stop_joinee();
    CHECK_EQ(pthread_join(joinee_t, NULL), 0);
  }

  printf("%s restart=%d from_child=%d: result %ld errno %s\n", kname[k], restart, from_child,
         result, result < 0 ? (result_errno == EINTR ? "EINTR" : "other") : "-");
  close(pfd[0]);
  close(pfd[1]);
  close(jfd[0]);
  close(jfd[1]);
  sem_destroy(&sem);
}

int main(void) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  pthread_t b;
  CHECK_EQ(pthread_create(&b, NULL, busy, NULL), 0); /* inherits the block */
  for (int from_child = 0; from_child <= 1; from_child++)
    for (int k = 0; k < K_COUNT; k++)
      for (int restart = 1; restart >= 0; restart--) run_case(k, restart, from_child);
  atomic_store(&stop_busy, 1);
  CHECK_EQ(pthread_join(b, NULL), 0);
  printf("process signals reach parked threads as natively\n");
  return 0;
}
