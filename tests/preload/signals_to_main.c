/* A signal sent to the process ends the main thread's wait when the main
 * thread does not block it. Linux starts its choice of a thread for a
 * signal sent to the process (kill, alarm's SIGALRM) at the thread group
 * leader and takes it whenever it does not block the signal and has none
 * pending (kernel/signal.c complete_signal, wants_signal), so a program
 * whose main thread waits in pause(), nanosleep(), read() or sigsuspend()
 * for a SIGALRM or SIGUSR1 while its worker threads compute with the
 * signal open sees that wait end (stress-ng's pthread stressors wait so,
 * in pause(), for their SIGALRM; goshim ran the handler on a worker and
 * the wait went on until stress-ng's next alarm, or forever). Each phase
 * has busy workers that leave the signal open and a sender thread that
 * sends the signal to the process every 2 ms (or an ITIMER_REAL every
 * 2 ms) until the main thread's wait has ended 10 times, each time with
 * EINTR after a handler ran on it (SA_NODEFER, so that main never blocks
 * the signal inside it). The last phase is the other side: while the main
 * thread blocks the signal, other threads take it.
 *
 * Deterministic natively: the signal is sent until the wait has ended, so
 * it does not matter whether the first one arrives before main's call.
 * (Not asserted: that no handler ever runs on a worker; natively one
 * sometimes does, when the leader still has a signal pending. Not tested:
 * POSIX timers, for which Linux 6.4 and later prefer the thread the timer
 * interrupted.) */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define WAKES 10
#define BUSY 2

static pthread_t main_thread;
static atomic_int on_main, on_other, stop_busy, phase_done;
static int phase_sig;
static int timer_mode; /* 0: kill, 1: alarm's itimer */

static void on_sig(int sig) {
  (void)sig;
  if (pthread_equal(pthread_self(), main_thread))
    atomic_fetch_add(&on_main, 1);
  else
    atomic_fetch_add(&on_other, 1);
}

/* Runs with the signal open, yielding its CPU often (under an M:N runtime
 * the main thread, once woken, then gets to run soon also on a loaded
 * machine). */
static void *busy(void *arg) {
  sigset_t open;
  sigemptyset(&open);
  sigaddset(&open, phase_sig);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &open, NULL), 0); /* (the last phase) */
  while (!atomic_load(&stop_busy)) sched_yield();
  return arg;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sends phase_sig to the process every 2 ms until the phase is over; gives
 * up (fails) after 20 s without the main thread's waits ending. */
static void *sender(void *arg) {
  double start = now();
  struct timespec two_ms = {0, 2000000};
  while (!atomic_load(&phase_done)) {
    if (timer_mode == 0) CHECK_EQ(kill(getpid(), phase_sig), 0);
    nanosleep(&two_ms, NULL);
    CHECK(now() - start < 20, "phase with signal %d: the main thread's wait did not end "
          "(%d handlers on main, %d on other threads)", phase_sig, atomic_load(&on_main),
          atomic_load(&on_other));
  }
  return arg;
}

static void handle(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sig;
  sa.sa_flags = SA_NODEFER; /* no SA_RESTART: read() returns EINTR */
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(sig, &sa, NULL), 0);
}

static pthread_t workers[BUSY], snd;

static void start_phase(int sig, int mode) {
  phase_sig = sig;
  timer_mode = mode;
  atomic_store(&on_main, 0);
  atomic_store(&on_other, 0);
  atomic_store(&stop_busy, 0);
  atomic_store(&phase_done, 0);
  handle(sig);
  for (int i = 0; i < BUSY; i++) CHECK_EQ(pthread_create(&workers[i], NULL, busy, NULL), 0);
  CHECK_EQ(pthread_create(&snd, NULL, sender, NULL), 0);
}

static void end_phase(const char *name) {
  atomic_store(&phase_done, 1);
  atomic_store(&stop_busy, 1);
  CHECK_EQ(pthread_join(snd, NULL), 0);
  for (int i = 0; i < BUSY; i++) CHECK_EQ(pthread_join(workers[i], NULL), 0);
  CHECK(atomic_load(&on_main) >= WAKES, "%s: %d handlers on main", name, atomic_load(&on_main));
  signal(phase_sig, SIG_IGN);
  printf("%s: main's wait ended %d times, by its own handler\n", name, WAKES);
}

int main(void) {
  main_thread = pthread_self();
  setvbuf(stdout, NULL, _IONBF, 0);

  /* pause() */
  start_phase(SIGUSR1, 0);
  for (int i = 0; i < WAKES; i++) {
    errno = 0;
    CHECK_EQ(pause(), -1);
    CHECK_EQ(errno, EINTR);
  }
  end_phase("pause, kill");

  /* nanosleep(): returns early with the time left */
  start_phase(SIGUSR2, 0);
  for (int i = 0; i < WAKES; i++) {
    struct timespec req = {100, 0}, rem = {0, 0};
    errno = 0;
    CHECK_EQ(nanosleep(&req, &rem), -1);
    CHECK_EQ(errno, EINTR);
    CHECK(rem.tv_sec > 50, "nanosleep left %ld s of 100", (long)rem.tv_sec);
  }
  end_phase("nanosleep, kill");

  /* read() of an empty pipe, handler without SA_RESTART: EINTR */
  int p[2];
  CHECK_EQ(pipe(p), 0);
  start_phase(SIGUSR1, 0);
  for (int i = 0; i < WAKES; i++) {
    char c;
    errno = 0;
    CHECK_EQ(read(p[0], &c, 1), -1);
    CHECK_EQ(errno, EINTR);
  }
  end_phase("read, kill");

  /* sigsuspend() with SIGUSR2 blocked around it */
  start_phase(SIGUSR2, 0);
  sigset_t block, old, none;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  sigemptyset(&none);
  for (int i = 0; i < WAKES; i++) {
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &block, &old), 0);
    errno = 0;
    CHECK_EQ(sigsuspend(&none), -1);
    CHECK_EQ(errno, EINTR);
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);
  }
  end_phase("sigsuspend, kill");

  /* SIGALRM from setitimer(ITIMER_REAL) every 2 ms, main in pause() */
  start_phase(SIGALRM, 1);
  struct itimerval it = {{0, 2000}, {0, 2000}}, off = {{0, 0}, {0, 0}};
  CHECK_EQ(setitimer(ITIMER_REAL, &it, NULL), 0);
  for (int i = 0; i < WAKES; i++) CHECK_EQ(pause(), -1);
  CHECK_EQ(setitimer(ITIMER_REAL, &off, NULL), 0);
  end_phase("pause, setitimer SIGALRM");

  /* Main blocks SIGUSR1: the kernel gives it to another thread. */
  sigset_t u1;
  sigemptyset(&u1);
  sigaddset(&u1, SIGUSR1);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &u1, NULL), 0);
  start_phase(SIGUSR1, 0);
  double start = now();
  while (atomic_load(&on_other) < WAKES) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
    CHECK(now() - start < 30, "blocked on main: %d handlers elsewhere", atomic_load(&on_other));
  }
  atomic_store(&phase_done, 1);
  atomic_store(&stop_busy, 1);
  CHECK_EQ(pthread_join(snd, NULL), 0);
  for (int i = 0; i < BUSY; i++) CHECK_EQ(pthread_join(workers[i], NULL), 0);
  CHECK_EQ(atomic_load(&on_main), 0);
  printf("main blocks it: the handler ran on other threads only\n");
  return 0;
}
