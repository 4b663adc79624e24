/* A blocking call fails with EINTR only after a handler ran on its own
 * thread. The main thread waits in read() of an empty pipe, in
 * nanosleep(), in poll() and in sem_wait() (never posted) while worker threads compute with SIGUSR1 open and a
 * sender thread sends SIGUSR1 to the process over and over. Linux may give
 * an instance to the main thread (it starts its choice at the thread group
 * leader) or to a worker; when the main thread is woken for one that a
 * worker then dequeues first, it finds no signal to handle and the kernel
 * restarts its call: the call never fails with EINTR without a handler
 * having run on the main thread (man 7 signal: a call is interrupted by a
 * signal handler). Under goshim a process signal routed to the main
 * thread's wait could be taken by a worker's delivery meanwhile: the wait
 * ended with EINTR and no handler on main (tests/preload/signals_to_main
 * failed with "read, kill: 9 handlers on main", 2 runs in 200 at
 * GOSHIM_MAXPROCS=2 under load).
 *
 * The last four phases also restart the wait now and then: the sender
 * sends SIGUSR2 (handler with SA_RESTART) to the main thread itself, so
 * an untimed futex wait, sem_wait, a pipe read and a pipe-to-pipe splice
 * go on after that handler; an EINTR after such a restart still needs a
 * SIGUSR1 handler on the main thread during the restarted wait (goshim's
 * futex and sem waits judged a later lost interrupt by the handler count
 * taken before the first wait, so an SA_RESTART handler made it look like
 * one had run; its fd waits went by the signal the wait was woken for, a
 * process SIGUSR1 that a worker then took, although only SIGUSR2's handler
 * ran on main, and its splice wait never restarted at all).
 *
 * Deterministic natively: each phase ends after a fixed number of EINTRs,
 * the signal is sent until then, and every EINTR is checked against the
 * main thread's handler count. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <linux/futex.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define EINTRS 300
#define BUSY 3

static pthread_t main_thread;
static atomic_int on_main, on_other, stop, restarts, restart_kicks;

static void on_usr1(int sig) {
  (void)sig;
  if (pthread_equal(pthread_self(), main_thread))
    atomic_fetch_add(&on_main, 1);
  else
    atomic_fetch_add(&on_other, 1);
}

static void on_usr2(int sig) {
  (void)sig;
  atomic_fetch_add(&restarts, 1);
}

static void *busy(void *arg) {
  while (!atomic_load(&stop)) sched_yield();
  return arg;
}

static void *sender(void *arg) {
  struct timespec t = {0, 200000};
  for (unsigned i = 0; !atomic_load(&stop); i++) {
    if (atomic_load(&restart_kicks) && i % 4 == 0)
      CHECK_EQ(pthread_kill(main_thread, SIGUSR2), 0);
    else
      CHECK_EQ(kill(getpid(), SIGUSR1), 0);
    nanosleep(&t, NULL);
  }
  return arg;
}

enum { READ, SLEEP, POLL, SEM, FUTEX, SPLICE };
static sem_t never;
static int never_word;

static void phase(int kind, const char *name) {
  int p[2], q[2];
  CHECK_EQ(pipe(p), 0);
  CHECK_EQ(pipe(q), 0);
  pthread_t w[BUSY], snd;
  atomic_store(&stop, 0);
  for (int i = 0; i < BUSY; i++) CHECK_EQ(pthread_create(&w[i], NULL, busy, NULL), 0);
  CHECK_EQ(pthread_create(&snd, NULL, sender, NULL), 0);
  for (int n = 0; n < EINTRS;) {
    int before = atomic_load(&on_main);
    long r;
    errno = 0;
    if (kind == READ) {
      char c;
      r = read(p[0], &c, 1);
    } else if (kind == SLEEP) {
      struct timespec req = {100, 0};
      r = nanosleep(&req, NULL);
    } else if (kind == POLL) {
      struct pollfd pf = {p[0], POLLIN, 0};
      r = poll(&pf, 1, 100000);
    } else if (kind == SEM) {
      r = sem_wait(&never);
    } else if (kind == SPLICE) {
      r = splice(p[0], NULL, q[1], NULL, 1, 0);  /* waits for p's data */
    } else {
      r = syscall(SYS_futex, &never_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    }
    CHECK_EQ(r, -1);  /* nothing else ends these waits */
    CHECK_EQ(errno, EINTR);
    CHECK(atomic_load(&on_main) > before, "%s: EINTR number %d without a handler on the main thread "
          "(%d handlers on main, %d on workers so far)", name, n + 1, atomic_load(&on_main),
          atomic_load(&on_other));
    n++;
  }
  atomic_store(&stop, 1);
  CHECK_EQ(pthread_join(snd, NULL), 0);
  for (int i = 0; i < BUSY; i++) CHECK_EQ(pthread_join(w[i], NULL), 0);
  check_kernel_threads(name);
  close(p[0]);
  close(p[1]);
  close(q[0]);
  close(q[1]);
  printf("%s: %d EINTRs, each after a handler on the main thread\n", name, EINTRS);
}

int main(void) {
  main_thread = pthread_self();
  setvbuf(stdout, NULL, _IONBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;  /* no SA_RESTART: each handler on main ends its call */
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  phase(READ, "read");
  phase(SLEEP, "nanosleep");
  phase(POLL, "poll");
  CHECK_EQ(sem_init(&never, 0, 0), 0);
  phase(SEM, "sem_wait");
  sa.sa_handler = on_usr2;
  sa.sa_flags = SA_RESTART;  /* a handler on main that restarts its wait */
  CHECK_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
  atomic_store(&restart_kicks, 1);
  phase(FUTEX, "futex, restarted");
  phase(SEM, "sem_wait, restarted");
  phase(READ, "read, restarted");
  phase(SPLICE, "splice, restarted");
  CHECK(atomic_load(&restarts) > 0, "no SIGUSR2 handler ran on the main thread");
  signal(SIGUSR1, SIG_IGN);
  signal(SIGUSR2, SIG_IGN);
  return 0;
}
