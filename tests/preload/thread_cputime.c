/* Per-thread CPU clocks count only the thread's own work:
 *   - CLOCK_THREAD_CPUTIME_ID of a new thread starts near 0 after main
 *     burned 0.3 s of CPU, and grows while the thread spins;
 *   - the clock pthread_getcpuclockid gives for another thread reads that
 *     thread's time (still while it sleeps, growing while it spins), and
 *     is invalid (EINVAL) once the thread has been joined;
 *   - getrusage(RUSAGE_THREAD) agrees;
 *   - a forked child's thread starts near 0.
 * The bounds are generous (a fresh thread must be below 0.1 s when the
 * process has used 0.3 s): they check what is counted, not how fast. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define MS 1000000LL

static int64_t clk_ns(clockid_t c) {
  struct timespec ts;
  CHECK_EQ(clock_gettime(c, &ts), 0);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t self_ns(void) { return clk_ns(CLOCK_THREAD_CPUTIME_ID); }
static int64_t proc_ns(void) { return clk_ns(CLOCK_PROCESS_CPUTIME_ID); }

static volatile uint64_t sink;

static void spin_a_bit(void) {
  uint64_t x = sink;
  for (int i = 0; i < 100000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  sink = x;
}

/* Spins until clock c has advanced by ns; fails if the process used 5 s
 * of CPU meanwhile (the clock does not grow). Returns the last reading. */
static int64_t spin_until(clockid_t c, int64_t ns) {
  int64_t start = clk_ns(c), p0 = proc_ns(), now;
  while ((now = clk_ns(c)) - start < ns) {
    spin_a_bit();
    CHECK(proc_ns() - p0 < 5000 * MS, "clock %d does not grow: %lld ns after 5 s of process CPU",
          (int)c, (long long)(now - start));
  }
  return now;
}

static int64_t rusage_thread_ns(void) {
  struct rusage ru;
  CHECK_EQ(getrusage(RUSAGE_THREAD, &ru), 0);
  return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
         ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

static sem_t spun, go;
static int64_t t_first, t_last, t_ru_first;

static void *fresh(void *arg) {
  (void)arg;
  t_first = self_ns();
  t_ru_first = rusage_thread_ns();
  t_last = spin_until(CLOCK_THREAD_CPUTIME_ID, 100 * MS);
  CHECK(rusage_thread_ns() >= 50 * MS, "RUSAGE_THREAD after 0.1 s of spinning: %lld ns",
        (long long)rusage_thread_ns());
  sem_post(&spun);
  sem_wait(&go);
  return NULL;
}

static volatile int stop_spinner;

static void *spinner(void *arg) {
  (void)arg;
  sem_post(&spun);
  while (!stop_spinner) spin_a_bit();
  return NULL;
}

int main(void) {
  CHECK_EQ(sem_init(&spun, 0, 0), 0);
  CHECK_EQ(sem_init(&go, 0, 0), 0);

  /* main's own clock grows with its work. */
  int64_t m0 = self_ns();
  int64_t p0 = proc_ns();
  spin_until(CLOCK_PROCESS_CPUTIME_ID, 300 * MS);
  int64_t m1 = self_ns();
  CHECK(m1 - m0 >= 150 * MS, "main used %lld ns of the process's %lld", (long long)(m1 - m0),
        (long long)(proc_ns() - p0));
  printf("main's clock grows\n");

  /* A new thread starts near 0 and grows while it spins. */
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, fresh, NULL), 0);
  CHECK_EQ(sem_wait(&spun), 0);
  CHECK(t_first < 100 * MS, "a new thread's clock starts at %lld ns", (long long)t_first);
  CHECK(t_ru_first < 100 * MS, "a new thread's RUSAGE_THREAD starts at %lld ns",
        (long long)t_ru_first);
  printf("a new thread starts near 0 and grows\n");

  /* Its clock, read from main while it waits, is its own time. */
  clockid_t tc;
  CHECK_EQ(pthread_getcpuclockid(t, &tc), 0);
  int64_t v = clk_ns(tc);
  CHECK(v >= t_last && v < t_last + 50 * MS, "thread clock read from main: %lld, its own last %lld",
        (long long)v, (long long)t_last);
  struct timespec res;
  CHECK_EQ(clock_getres(tc, &res), 0);
  printf("another thread's clock is its time\n");

  /* main's clock through pthread_getcpuclockid is main's. */
  clockid_t mc;
  CHECK_EQ(pthread_getcpuclockid(pthread_self(), &mc), 0);
  int64_t a = self_ns(), b = clk_ns(mc), c = self_ns();
  CHECK(a <= b && b <= c, "main: %lld <= %lld <= %lld", (long long)a, (long long)b, (long long)c);

  sem_post(&go);
  CHECK_EQ(pthread_join(t, NULL), 0);
  /* pthread_join returns once the kernel has cleared the thread's tid
   * (CLONE_CHILD_CLEARTID), which it does before it releases the thread:
   * for a moment after the join the clock can still be read (more often
   * on a loaded machine). The clock must become invalid, with EINVAL and
   * nothing else, and every reading until then is the thread's final
   * time (it no longer runs). */
  struct timespec ts, w0, w1;
  CHECK_EQ(clock_gettime(CLOCK_MONOTONIC, &w0), 0);
  for (;;) {
    errno = 0;
    int r = clock_gettime(tc, &ts);
    if (r == -1) break;
    CHECK_EQ(r, 0);
    int64_t after = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    CHECK(after >= t_last && after < t_last + 50 * MS,
          "a joined thread's clock reads %lld, its own last %lld", (long long)after, (long long)t_last);
    CHECK_EQ(clock_gettime(CLOCK_MONOTONIC, &w1), 0);
    CHECK(w1.tv_sec - w0.tv_sec < 10, "a joined thread's clock is still valid after 10 s");
    sched_yield();
  }
  CHECK_EQ(errno, EINVAL);
  printf("a joined thread's clock is invalid\n");

  /* A spinning thread's clock grows as main watches it. */
  pthread_t s;
  CHECK_EQ(pthread_create(&s, NULL, spinner, NULL), 0);
  CHECK_EQ(sem_wait(&spun), 0);
  clockid_t sc;
  CHECK_EQ(pthread_getcpuclockid(s, &sc), 0);
  int64_t s0 = clk_ns(sc);
  CHECK(s0 < 100 * MS, "the spinner starts at %lld ns", (long long)s0);
  int64_t p1 = proc_ns(), s1;
  while ((s1 = clk_ns(sc)) - s0 < 50 * MS) {
    CHECK(proc_ns() - p1 < 5000 * MS, "the spinner's clock does not grow: %lld", (long long)s1);
    sched_yield();
  }
  stop_spinner = 1;
  CHECK_EQ(pthread_join(s, NULL), 0);
  printf("a running thread's clock grows\n");

  /* A forked child's thread starts near 0. */
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    int64_t k = self_ns();
    if (k >= 100 * MS) {
      fprintf(stderr, "the child's clock starts at %lld ns\n", (long long)k);
      _exit(1);
    }
    spin_until(CLOCK_THREAD_CPUTIME_ID, 20 * MS);
    _exit(0);
  }
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
  printf("a forked child's thread starts near 0\n");
  return 0;
}
