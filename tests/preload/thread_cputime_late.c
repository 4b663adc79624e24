/* A thread's CPU clocks count the time it used before anyone read a thread
 * CPU clock (issue 12 point 9): a worker computes, then reads its
 * CLOCK_THREAD_CPUTIME_ID and getrusage(RUSAGE_THREAD) once, at its end
 * (a per-worker report in a thread's epilogue). No thread of the process
 * reads a thread CPU clock before that.
 *   - one worker computes until the process CPU clock has advanced by at
 *     least 200 ms; its two readings are at least half of that advance and
 *     at most the process's total;
 *   - pinned to one CPU (the process re-executes itself), two workers
 *     compute in turn (the second starts when the first has read its
 *     clocks) while a third thread sleeps in read() on a pipe and a fourth
 *     in waitpid() (a blocking system call): each of those two reads below
 *     30 ms, each worker at least half of its advance, and the workers' sum
 *     is at most the process's total.
 * The bounds are generous: they check what is counted, not how fast (the
 * readings go to stderr). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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

static int64_t proc_ns(void) { return clk_ns(CLOCK_PROCESS_CPUTIME_ID); }

static int64_t rusage_thread_ns(void) {
  struct rusage ru;
  CHECK_EQ(getrusage(RUSAGE_THREAD, &ru), 0);
  return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
         ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

static volatile uint64_t sink;

struct report {
  int64_t used;   /* the process CPU clock's advance while it computed */
  int64_t clock;  /* CLOCK_THREAD_CPUTIME_ID at its end */
  int64_t ru;     /* getrusage(RUSAGE_THREAD) at its end */
  int64_t total;  /* the process CPU clock after those readings */
};

/* Computes until the process CPU clock has advanced by 200 ms, then reads
 * the thread's clocks once. */
static void compute_and_report(struct report *r) {
  int64_t p0 = proc_ns(), p;
  uint64_t x = sink;
  do {
    for (int i = 0; i < 200000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
  } while ((p = proc_ns()) - p0 < 200 * MS);
  r->used = p - p0;
  r->clock = clk_ns(CLOCK_THREAD_CPUTIME_ID);
  r->ru = rusage_thread_ns();
  r->total = proc_ns();
}

static void check_worker(const char *name, const struct report *r) {
  fprintf(stderr, "%s: used %.3f s, thread clock %.3f s, RUSAGE_THREAD %.3f s, process %.3f s\n", name,
         r->used / 1e9, r->clock / 1e9, r->ru / 1e9, r->total / 1e9);
  CHECK(r->clock >= r->used / 2, "%s: thread clock %lld ns, less than half of the %lld ns it used",
        name, (long long)r->clock, (long long)r->used);
  CHECK(r->ru >= r->used / 2, "%s: RUSAGE_THREAD %lld ns, less than half of the %lld ns it used",
        name, (long long)r->ru, (long long)r->used);
  CHECK(r->clock <= r->total, "%s: thread clock %lld ns above the process's %lld ns", name,
        (long long)r->clock, (long long)r->total);
  CHECK(r->ru <= r->total + 1000, "%s: RUSAGE_THREAD %lld ns above the process's %lld ns", name,
        (long long)r->ru, (long long)r->total);
}

/* ---- one worker ---- */

static void *single(void *arg) {
  compute_and_report(arg);
  return NULL;
}

static void one_worker(void) {
  struct report r;
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, single, &r), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  check_worker("one worker", &r);
  printf("one worker counted\n");
}

/* ---- one CPU: two workers in turn, a sleeper ---- */

static sem_t turn_b;
static int pipefd[2];

static void *worker_a(void *arg) {
  compute_and_report(arg);
  CHECK_EQ(sem_post(&turn_b), 0);
  return NULL;
}

static void *worker_b(void *arg) {
  while (sem_wait(&turn_b) != 0) CHECK_EQ(errno, EINTR);
  compute_and_report(arg);
  return NULL;
}

/* Blocked in waitpid() (a blocking system call) for a child that ends
 * when the pipe's write end is closed. */
static pid_t child;

static void *waiter(void *arg) {
  int st;
  pid_t r;
  while ((r = waitpid(child, &st, 0)) < 0) CHECK_EQ(errno, EINTR);
  CHECK_EQ(r, child);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
  *(int64_t *)arg = clk_ns(CLOCK_THREAD_CPUTIME_ID);
  return NULL;
}

static void *sleeper(void *arg) {
  char c;
  ssize_t n;
  while ((n = read(pipefd[0], &c, 1)) < 0) CHECK_EQ(errno, EINTR);
  CHECK_EQ(n, 1);
  *(int64_t *)arg = clk_ns(CLOCK_THREAD_CPUTIME_ID);
  return NULL;
}

static void two_in_turn(void) {
  struct report a, b;
  int64_t slept, waited;
  pthread_t ta, tb, ts, tw;
  int cpipe[2];
  CHECK_EQ(sem_init(&turn_b, 0, 0), 0);
  CHECK_EQ(pipe(pipefd), 0);
  CHECK_EQ(pipe(cpipe), 0);
  child = fork();
  CHECK(child >= 0, "fork: %s", strerror(errno));
  if (child == 0) {
    char c;
    close(cpipe[1]);
    _exit(read(cpipe[0], &c, 1) == 0 ? 0 : 1); /* end of file: the parent closed its end */
  }
  CHECK_EQ(close(cpipe[0]), 0);
  CHECK_EQ(pthread_create(&tw, NULL, waiter, &waited), 0);
  CHECK_EQ(pthread_create(&ts, NULL, sleeper, &slept), 0);
  CHECK_EQ(pthread_create(&tb, NULL, worker_b, &b), 0);
  CHECK_EQ(pthread_create(&ta, NULL, worker_a, &a), 0);
  CHECK_EQ(pthread_join(ta, NULL), 0);
  CHECK_EQ(pthread_join(tb, NULL), 0);
  CHECK_EQ(write(pipefd[1], "x", 1), 1);
  CHECK_EQ(pthread_join(ts, NULL), 0);
  CHECK_EQ(close(cpipe[1]), 0); /* the child ends, the waiter's waitpid returns */
  CHECK_EQ(pthread_join(tw, NULL), 0);
  int64_t total = proc_ns();
  check_worker("one CPU, worker a", &a);
  check_worker("one CPU, worker b", &b);
  fprintf(stderr, "one CPU: sleeper %.3f s, waiter %.3f s, workers' sum %.3f s, process %.3f s\n",
          slept / 1e9, waited / 1e9, (a.clock + b.clock) / 1e9, total / 1e9);
  CHECK(slept < 30 * MS, "sleeper's thread clock %lld ns (blocked in read the whole time)",
        (long long)slept);
  CHECK(waited < 30 * MS, "waiter's thread clock %lld ns (blocked in waitpid the whole time)",
        (long long)waited);
  CHECK(a.clock + b.clock <= total, "workers' sum %lld ns above the process's %lld ns",
        (long long)(a.clock + b.clock), (long long)total);
  printf("one CPU: two workers in turn, a sleeper and a waiter counted\n");
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "one-cpu") == 0) {
    two_in_turn();
    return 0;
  }
  one_worker();
  fflush(stdout);
  /* The one-CPU part in a fresh process (no thread clock read yet),
   * pinned before it starts. */
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    cpu_set_t s;
    CPU_ZERO(&s);
    if (syscall(SYS_sched_getaffinity, 0, sizeof s, &s) < 0) _exit(77);
    int c = 0;
    while (c < CPU_SETSIZE && !CPU_ISSET(c, &s)) c++;
    CPU_ZERO(&s);
    CPU_SET(c, &s);
    if (syscall(SYS_sched_setaffinity, 0, sizeof s, &s) < 0) _exit(77);
    char *args[] = {argv[0], "one-cpu", NULL};
    execv("/proc/self/exe", args);
    _exit(1);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0) CHECK_EQ(errno, EINTR);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
    fprintf(stderr, "SKIP: cannot pin to one CPU\n");
    return 77;
  }
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "one-CPU part: status %#x", st);
  return 0;
}
