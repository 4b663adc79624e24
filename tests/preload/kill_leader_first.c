/* kill() of its own process by a thread other than the main thread, while
 * the main thread leaves the signal open and has no other signal pending:
 * the handler runs on the main thread, never on the sender. Linux starts
 * its choice of a thread at the thread group leader and takes it when it
 * does not block the signal and either runs or has no signal pending
 * (kernel/signal.c complete_signal, wants_signal); the sender returns
 * from kill() without a handler (POSIX asks for one on the caller only
 * when no other thread leaves the signal open). Worker threads compute
 * with the signal open meanwhile.
 *
 * The main thread waits in read() of a pipe, in poll() of it and in
 * nanosleep(), 100 times each, then spins 25 times; the sender sends one SIGUSR1
 * per round, once the main thread is done with the previous one, and
 * waits for its handler before the next. The handler writes a byte to the
 * pipe, so that a signal that comes before the main thread's call cannot
 * leave it waiting: the call then returns that byte.
 * (goshim: the sender's kill() took the instance goshim held for the main
 * thread and ran the handler itself, the main thread's wait going on:
 * tests/preload/eintr_handler_ran took 70-120 s at one processor and
 * tests/preload/signals_to_main saw 9 handlers on main and 9,929 on other
 * threads in 20 s.)
 *
 * Deterministic natively: one signal in flight at a time, sent while the
 * main thread can take it. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define BUSY 2

enum { READ, SLEEP, POLL, SPIN, KINDS };
static const char *const names[KINDS] = {"read", "nanosleep", "poll", "spin"};
/* Fewer spins: under an M:N runtime at one processor the sender runs only
 * once the spinning main thread's time slice is over. */
static const int rounds[KINDS] = {100, 100, 100, 25};
#define TOTAL (100 + 100 + 100 + 25)

static pthread_t main_thread;
static atomic_int on_main, on_other, ready, stop, kind;
static int p[2];

static void on_usr1(int sig) {
  (void)sig;
  char c = 1;
  CHECK_EQ(write(p[1], &c, 1), 1);
  if (pthread_equal(pthread_self(), main_thread))
    atomic_fetch_add(&on_main, 1);
  else
    atomic_fetch_add(&on_other, 1);
}

static void *busy(void *arg) {
  while (!atomic_load(&stop)) sched_yield();
  return arg;
}

/* Round n (from 0): waits until the main thread is ready for it (done
 * with the last one), sends, and waits for the handler. */
static void *sender(void *arg) {
  for (int n = 0; n < TOTAL; n++) {
    while (atomic_load(&ready) <= n) sched_yield();
    CHECK_EQ(kill(getpid(), SIGUSR1), 0);
    while (atomic_load(&on_main) + atomic_load(&on_other) <= n) sched_yield();
    CHECK(atomic_load(&on_other) == 0, "%s, signal %d: the handler ran on another thread than main "
          "(%d on main)", names[atomic_load(&kind)], n + 1, atomic_load(&on_main));
  }
  return arg;
}

int main(void) {
  main_thread = pthread_self();
  setvbuf(stdout, NULL, _IONBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;  /* no SA_RESTART: the handler ends each wait */
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(pipe(p), 0);
  pthread_t w[BUSY], snd;
  for (int i = 0; i < BUSY; i++) CHECK_EQ(pthread_create(&w[i], NULL, busy, NULL), 0);
  CHECK_EQ(pthread_create(&snd, NULL, sender, NULL), 0);
  int n = 0;
  for (int k = 0; k < KINDS; k++) {
    atomic_store(&kind, k);
    for (int i = 0; i < rounds[k]; i++) {
      int before = atomic_load(&on_main);
      atomic_store(&ready, ++n);
      char c;
      long r;
      errno = 0;
      if (k == READ) {
        r = read(p[0], &c, 1);
      } else if (k == POLL) {
        struct pollfd pf = {p[0], POLLIN, 0};
        r = poll(&pf, 1, 100000);
      } else if (k == SLEEP) {
        struct timespec req = {1, 0};
        while ((r = nanosleep(&req, NULL)) == 0 && atomic_load(&on_main) == before) {
        }
      } else {
        while (atomic_load(&on_main) == before && atomic_load(&on_other) == 0) {
        }
        r = 0;
      }
      /* EINTR: its handler ended the call; else it came before the call */
      CHECK(r == (k == READ || k == POLL) || (r == -1 && errno == EINTR && k != SPIN), "%s: returned %ld, errno %d",
            names[k], r, errno);
      if (!(k == READ && r == 1)) CHECK_EQ(read(p[0], &c, 1), 1);
      CHECK(atomic_load(&on_main) == before + 1, "%s, round %d: the wait ended with %d handlers on main "
            "(%d before, %d on other threads)", names[k], i + 1, atomic_load(&on_main), before,
            atomic_load(&on_other));
    }
    printf("%s: %d signals sent by another thread, each handled on the main thread\n", names[k], rounds[k]);
  }
  CHECK_EQ(pthread_join(snd, NULL), 0);
  atomic_store(&stop, 1);
  for (int i = 0; i < BUSY; i++) CHECK_EQ(pthread_join(w[i], NULL), 0);
  check_kernel_threads("end");
  return 0;
}
