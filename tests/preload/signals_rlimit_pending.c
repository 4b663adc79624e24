/* RLIMIT_SIGPENDING as the kernel applies it (kernel/signal.c,
 * sig_get_ucounts): every queued signal counts against the receiving
 * process's current soft limit, with all the queued signals of the user
 * (SigQ in /proc/self/status: count/limit). A thread that blocks the
 * signals lowers its limit at run time to the user's count now + ROOM,
 * then (every thread blocks them):
 *   - queues PROC values to its own process with sigqueue: all accepted;
 *   - queues values to itself with pthread_sigqueue: exactly
 *     ROOM - PROC accepted, the others EAGAIN;
 *   - at the limit: raise and pthread_kill of a real-time signal, and
 *     sigqueue to the process, fail with EAGAIN; pthread_sigqueue of a
 *     standard signal succeeds (the kernel drops its siginfo instead);
 *   - raises the limit by MORE: exactly MORE more accepted, then EAGAIN;
 *   - kill() of a real-time signal at the limit succeeds (SI_USER: the
 *     kernel makes it pending without its siginfo, never EAGAIN);
 *   - takes everything with sigtimedwait: each value once, in sending
 *     order; the killed signal and the standard one once each.
 * Other processes of the user may queue or take signals meanwhile and move
 * the count (root's count moves whenever other root processes queue
 * signals: a make test beside other work got 29 of 30 once, its count
 * having moved and moved back around one round). As root the process first
 * becomes a user of its own (a uid no other process has), whose count only
 * it moves; otherwise a round whose count before and after (everything
 * taken) differ is run again (up to ROUNDS), and only a round with a
 * steady count is judged. The output does not depend on the count. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common.h"

#define ROOM 40
#define PROC 10
#define MORE 5
#define EXTRA 20
#define ROUNDS 20

static long sigq_count(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long n = -1;
  CHECK(f != NULL, "/proc/self/status");
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "SigQ:", 5) == 0) n = atol(line + 5);
  fclose(f);
  CHECK(n >= 0, "no SigQ line");
  return n;
}

static void set_soft(rlim_t cur) {
  struct rlimit rl;
  CHECK_EQ(getrlimit(RLIMIT_SIGPENDING, &rl), 0);
  CHECK(cur <= rl.rlim_max, "hard limit %lu below %lu", (unsigned long)rl.rlim_max,
        (unsigned long)cur);
  rl.rlim_cur = cur;
  CHECK_EQ(setrlimit(RLIMIT_SIGPENDING, &rl), 0);
}

/* Takes n instances of sig (sigwaitinfo), checking values first..
 * first+n-1 in order when vals, then checks that none is left pending. */
static void take(int sig, int n, int vals, int first) {
  sigset_t s, p;
  sigemptyset(&s);
  sigaddset(&s, sig);
  siginfo_t si;
  for (int i = 0; i < n; i++) {
    CHECK_EQ(sigwaitinfo(&s, &si), sig);
    if (vals) {
      CHECK_EQ(si.si_code, SI_QUEUE);
      CHECK_EQ(si.si_value.sival_int, first + i);
    }
  }
  CHECK_EQ(sigpending(&p), 0);
  CHECK(!sigismember(&p, sig), "signal %d still pending after %d taken", sig, n);
}

/* Queues up to max values from first on to the calling thread: how many
 * were accepted (values first, first + 1, ...). *steady is cleared if an
 * accepted one followed a refused one (the user's count moved: another
 * process queued and took a signal meanwhile). */
static int fill(int sig, int max, int first, int *steady) {
  int ok = 0, refused = 0;
  for (int i = 0; i < max; i++) {
    union sigval v = {.sival_int = first + ok};
    int r = pthread_sigqueue(pthread_self(), sig, v);
    if (r == 0) {
      if (refused) *steady = 0;
      ok++;
    } else {
      CHECK_EQ(r, EAGAIN);
      refused++;
    }
  }
  return ok;
}

static int rt0, rt1, rt2, rt3;
static rlim_t orig_cur;

/* One round; 1 if judged, 0 if the user's count moved (run again). */
static int round_once(int *self_ok, int *more_ok) {
  long k0 = sigq_count();
  rlim_t lim = (rlim_t)k0 + ROOM;
  set_soft(lim);
  pid_t me = getpid();
  union sigval v;
  for (int i = 0; i < PROC; i++) {
    v.sival_int = i;
    CHECK_EQ(sigqueue(me, rt2, v), 0);
  }
  int steady = 1;
  int ok = fill(rt0, ROOM - PROC + EXTRA, 0, &steady);
  /* At the limit (if the count held still). */
  int r_raise = raise(rt1) == 0 ? 0 : errno;
  int r_kill = pthread_kill(pthread_self(), rt1);
  v.sival_int = PROC;
  int r_sq = sigqueue(me, rt2, v) == 0 ? 0 : errno;
  v.sival_int = 7;
  CHECK_EQ(pthread_sigqueue(pthread_self(), SIGUSR1, v), 0);
  /* Room for MORE more. */
  set_soft(lim + MORE);
  int more = fill(rt0, MORE + EXTRA, ok, &steady);
  CHECK_EQ(kill(me, rt3), 0);
  /* Everything back. */
  take(rt0, ok + more, 1, 0);
  take(rt1, (r_raise == 0) + (r_kill == 0), 0, 0);
  take(rt2, PROC + (r_sq == 0), 1, 0);
  take(rt3, 1, 0, 0);
  take(SIGUSR1, 1, 0, 0);
  set_soft(orig_cur);
  long k1 = sigq_count();
  if (k1 != k0 || !steady) return 0;
  CHECK(ok == ROOM - PROC, "%d of %d queued to itself at the limit (%d expected)", ok,
        ROOM - PROC + EXTRA, ROOM - PROC);
  CHECK(more == MORE, "%d queued after raising the limit by %d", more, MORE);
  CHECK_EQ(r_raise, EAGAIN);
  CHECK_EQ(r_kill, EAGAIN);
  CHECK_EQ(r_sq, EAGAIN);
  *self_ok = ok;
  *more_ok = more;
  return 1;
}

static void *worker(void *arg) {
  (void)arg;
  int ok = -1, more = -1, judged = 0;
  for (int r = 0; r < ROUNDS && !judged; r++) judged = round_once(&ok, &more);
  CHECK(judged, "the user's count of queued signals moved in each of %d rounds", ROUNDS);
  printf("limit = count + %d: %d to the process and %d to the thread accepted, then EAGAIN\n",
         ROOM, PROC, ok);
  printf("at the limit: raise, pthread_kill, sigqueue EAGAIN; standard pthread_sigqueue and kill ok\n");
  printf("limit raised by %d: %d more accepted\n", MORE, more);
  return NULL;
}

int main(void) {
  if (geteuid() == 0) {
    /* A uid of its own (uids are 32-bit; this one belongs to nobody). */
    uid_t own = (uid_t)(2000000000u + (unsigned)getpid());
    CHECK_EQ(setresuid(own, own, own), 0);
  }
  rt0 = SIGRTMIN;
  rt1 = SIGRTMIN + 1;
  rt2 = SIGRTMIN + 2;
  rt3 = SIGRTMIN + 3;
  struct rlimit rl;
  CHECK_EQ(getrlimit(RLIMIT_SIGPENDING, &rl), 0);
  orig_cur = rl.rlim_cur;
  /* Every thread blocks them: the process-directed ones stay queued. */
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, rt0);
  sigaddset(&s, rt1);
  sigaddset(&s, rt2);
  sigaddset(&s, rt3);
  sigaddset(&s, SIGUSR1);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, worker, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("ok\n");
  return 0;
}
