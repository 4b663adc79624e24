/* Helpers for the integration test programs. These programs know nothing
 * of goshim: they are ordinary pthread programs that check their own
 * results and exit 0 on success. The runner (tests/run_preload.sh) runs
 * each natively and under LD_PRELOAD=libgoshim.so.
 *
 * MAX_KERNEL_THREADS: when set (the runner sets it under goshim), the
 * program also checks that the process never needed more kernel threads
 * than that while its many threads were alive. */
#ifndef TESTS_PRELOAD_COMMON_H
#define TESTS_PRELOAD_COMMON_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* Evaluates a and b once (they may be calls with side effects). */
#define CHECK_EQ(a, b)                                                       \
  do {                                                                       \
    long check_a_ = (long)(a), check_b_ = (long)(b);                         \
    if (check_a_ != check_b_) {                                              \
      fprintf(stderr, "FAIL %s:%d: %s == %s: %s = %ld, %s = %ld\n", __FILE__, \
              __LINE__, #a, #b, #a, check_a_, #b, check_b_);                 \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

/* The decimal value of a /proc/self/status line ("Threads:", "SigQ:"),
 * or -1. */
static inline long self_status(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long n = -1;
  size_t k = strlen(key);
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, k) == 0) n = atol(line + k);
  fclose(f);
  return n;
}

/* Kernel threads of this process right now (/proc/self/status). */
static inline int kernel_threads(void) { return (int)self_status("Threads:"); }

/* Fails if MAX_KERNEL_THREADS is set and exceeded. Returns the count. */
static inline int check_kernel_threads(const char *when) {
  int n = kernel_threads();
  const char *lim = getenv("MAX_KERNEL_THREADS");
  if (lim && *lim) {
    int max = atoi(lim);
    CHECK(n <= max, "%s: %d kernel threads, at most %d expected", when, n, max);
  }
  return n;
}

static inline int env_int(const char *name, int dflt) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : dflt;
}

/* Handshakes that order events between threads or processes without a
 * sleep (a sleep decides nothing: the native output must not change under
 * load).
 *
 * A thread about to block in a call publishes its kernel thread id
 * (self_tid()) just before the call; the thread that must act while it is
 * blocked waits for that kernel thread to sleep: state S in
 * /proc/self/task/TID/stat (wait_tid_asleep). Natively the thread can sleep
 * nowhere else between the two, so it is inside its call. Under an M:N
 * runtime the id is that of the kernel thread that ran the call: it sleeps
 * (or runs the waiter itself) once the caller no longer runs, or it runs
 * another thread of the program: a kernel thread that uses
 * RUNNING_ELSEWHERE_TICKS of CPU time (utime + stime) during the wait
 * without sleeping is taken as that, and the wait ends. Natively a thread
 * about to block uses microseconds of CPU before it does, however loaded
 * the machine (a thread waiting for a CPU gains no CPU time), so natively
 * this never decides; should it end a wait early under an M:N runtime, the
 * caller acts early, and every caller is written so that acting early
 * prints the same. `done`, when
 * not NULL, is the caller's "the call returned" flag: the wait then also
 * ends when it is set (the caller's own check reports that). Process
 * states work the same way (proc_state; all_tasks_asleep, wait_all_asleep
 * for every thread of a child process). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if !defined(__cplusplus) && !defined(__USE_MISC)
long syscall(long number, ...); /* a program without _DEFAULT_SOURCE */
#endif

static inline int self_tid(void) { return (int)syscall(SYS_gettid); }

/* The state letter in a /proc stat file, or 0 if it is gone; *cpu (if not
   NULL) gets its utime + stime in clock ticks. */
static inline char stat_state_cpu(const char *path, long long *cpu) {
  char buf[1024];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ') return 0;
  char st = p[2];
  if (cpu) { /* after the state: 10 fields, then utime and stime */
    char *q = p + 2;
    long long ut = 0, stt = 0;
    for (int field = 0; field < 11 && q; field++) q = strchr(q + 1, ' ');
    if (q && sscanf(q, " %lld %lld", &ut, &stt) == 2)
      *cpu = ut + stt;
    else
      *cpu = 0;
  }
  return st;
}

static inline char stat_state(const char *path) { return stat_state_cpu(path, NULL); }

static inline char tid_state_cpu(int tid, long long *cpu) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  return stat_state_cpu(path, cpu);
}

static inline char tid_state(int tid) { return tid_state_cpu(tid, NULL); }

static inline char proc_state(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  return stat_state(path);
}

#define RUNNING_ELSEWHERE_TICKS 20 /* 0.2 s at USER_HZ 100 */

static inline long long mono_ns_(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The state of thread tid of process pid (another process), 0 if gone;
   *cpu as stat_state_cpu. */
static inline char task_state_of(int pid, int tid, long long *cpu) {
  char path[80];
  snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
  return stat_state_cpu(path, cpu);
}

/* Waits until thread tid of process pid (a child) sleeps, or it is gone
   or a zombie, or it runs another thread (as wait_tid_asleep). Fails after
   30 s. */
static inline void wait_task_asleep(int pid, int tid) {
  long long t0 = mono_ns_(), cpu0 = -1, cpu = 0;
  char st;
  while ((st = task_state_of(pid, tid, &cpu)) != 'S' && st && st != 'Z' && st != 'X') {
    long long now = mono_ns_();
    if (cpu0 < 0) cpu0 = cpu;
    if (cpu - cpu0 >= RUNNING_ELSEWHERE_TICKS) return; /* it runs another thread */
    CHECK(now - t0 < 30000000000LL, "thread %d of process %d never blocked", tid, pid);
    sched_yield();
  }
}

/* Waits until kernel thread tid of this process sleeps (S), or *done is
 * set, or tid is the caller's own kernel thread, or it is gone, or it has
 * used RUNNING_ELSEWHERE_TICKS of CPU meanwhile. Fails after 30 s. */
static inline void wait_tid_asleep(int tid, const volatile int *done) {
  long long t0 = mono_ns_(), cpu0 = -1, cpu = 0;
  char st;
  while (!(done && __atomic_load_n(done, __ATOMIC_ACQUIRE)) && tid != self_tid() &&
         (st = tid_state_cpu(tid, &cpu)) != 'S') {
    long long now = mono_ns_();
    if (!st || st == 'Z' || st == 'X') return; /* gone: it will not block */
    if (cpu0 < 0) cpu0 = cpu;
    if (cpu - cpu0 >= RUNNING_ELSEWHERE_TICKS) return; /* it runs another thread */
    CHECK(now - t0 < 30000000000LL, "thread %d never blocked", tid);
    sched_yield();
  }
}

/* 1 if every thread of process pid sleeps (state S), -1 if the process
   is gone or a zombie, else 0. */
static inline int all_tasks_asleep(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  struct dirent *e;
  int ok = 1, n = 0;
  while (ok && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char sp[300];
    snprintf(sp, sizeof sp, "/proc/%d/task/%s/stat", pid, e->d_name);
    char st = stat_state(sp);
    if (!st) continue; /* the thread just exited */
    if (st == 'Z' || st == 'X') {
      closedir(d);
      return -1;
    }
    ok = st == 'S';
    n++;
  }
  closedir(d);
  return ok && n > 0;
}

/* Waits until every thread of process pid (a child) sleeps, or it is gone
   or a zombie (the caller's checks then report what it did). Fails after
   30 s. Natively a child that runs one blocking call sleeps in nothing
   else; a child whose threads sleep early only sees its data sooner. */
static inline void wait_all_asleep(int pid) {
  long long t0 = mono_ns_();
  while (!all_tasks_asleep(pid)) {
    CHECK(mono_ns_() - t0 < 30000000000LL, "process %d never blocked", pid);
    sched_yield();
  }
}

#ifdef __USE_GNU /* (pthread_getattr_np: not in a program without _GNU_SOURCE) */
/* The calling thread's stack as its attributes give it: [*lo, *hi). */
static inline void self_stack(uintptr_t *lo, uintptr_t *hi) {
  pthread_attr_t a;
  void *addr = NULL;
  size_t size = 0;
  CHECK(pthread_getattr_np(pthread_self(), &a) == 0, "pthread_getattr_np");
  CHECK(pthread_attr_getstack(&a, &addr, &size) == 0, "pthread_attr_getstack");
  pthread_attr_destroy(&a);
  *lo = (uintptr_t)addr;
  *hi = (uintptr_t)addr + size;
}
#endif

/* Waits (bounded: fails after 30 s) until *flag is nonzero. */
static inline void wait_flag(const volatile int *flag) {
  long long t0 = mono_ns_();
  while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE)) {
    CHECK(mono_ns_() - t0 < 30000000000LL, "a flag was never set");
    sched_yield();
  }
}

/* For a test that needs every thread on one CPU: unless the environment
 * variable env is set, pins the process to the first CPU of the calling
 * kernel thread's mask (raw system calls: the kernel's view), makes it
 * `nicer` nice steps nicer (up to 19; 0: unchanged; kept by the exec and
 * by every thread made afterwards), sets env and executes itself again, so
 * that every thread, goshim's too, starts pinned. Returns at once when env
 * is set; otherwise returns only on failure, with the exit status to use
 * (77, SKIP, when the CPU cannot be pinned; 1 when the exec failed). */
#ifdef __USE_GNU /* (cpu_set_t: not in a program without _GNU_SOURCE) */
static inline int pin_one_cpu_reexec(const char *env, char **argv, int nicer) {
  if (getenv(env)) return 0;
  cpu_set_t s;
  CPU_ZERO(&s);
  if (syscall(SYS_sched_getaffinity, 0, sizeof s, &s) < 0) {
    fprintf(stderr, "SKIP: sched_getaffinity failed: cannot pin\n");
    return 77;
  }
  int c = 0;
  while (c < CPU_SETSIZE && !CPU_ISSET(c, &s)) c++;
  CPU_ZERO(&s);
  CPU_SET(c, &s);
  if (syscall(SYS_sched_setaffinity, 0, sizeof s, &s) < 0) {
    fprintf(stderr, "SKIP: sched_setaffinity failed: cannot pin\n");
    return 77;
  }
  if (nicer > 0) {
    errno = 0;
    int n = getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && n < 19)
      CHECK_EQ(setpriority(PRIO_PROCESS, 0, n + nicer < 19 ? n + nicer : 19), 0);
  }
  setenv(env, "1", 1);
  execv("/proc/self/exe", argv);
  fprintf(stderr, "re-exec failed: %s\n", strerror(errno));
  return 1;
}
#endif

/* Lets other threads run for a while, to vary where they are when the
 * caller acts next: n sched_yield calls, but at most max_us of time.
 * Natively a yield hands the CPU to whatever else is runnable on a loaded
 * machine, so n yields could take seconds and a test minutes; under goshim
 * a yield is a goroutine switch and n of them take far less than max_us. */
static inline void yield_a_while(int n, long max_us) {
  long long t0 = mono_ns_();
  for (int k = 0; k < n && mono_ns_() - t0 < max_us * 1000LL; k++) sched_yield();
}

/* A round of thread churn: n threads created, started together (a
 * barrier), each taking and releasing one mutex 200 times, then joined; the
 * count is checked. The send-to-self tests (kill_self_sync,
 * killpg_self_sync, pidfd_signal_self) send each signal after such a round,
 * when the runtime has just made, parked and retired many threads. */
struct churn_ {
  pthread_mutex_t mu;
  pthread_barrier_t bar;
  long count;
};
static inline void *churn_worker_(void *arg) {
  struct churn_ *c = (struct churn_ *)arg;
  pthread_barrier_wait(&c->bar);
  for (int i = 0; i < 200; i++) {
    pthread_mutex_lock(&c->mu);
    c->count++;
    pthread_mutex_unlock(&c->mu);
  }
  return NULL;
}
static inline void threads_churn(int n) {
  static struct churn_ c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  pthread_t t[64];
  CHECK(n > 0 && n <= 64, "threads_churn: %d threads (1 to 64)", n);
  c.count = 0;
  CHECK_EQ(pthread_barrier_init(&c.bar, NULL, n + 1), 0);
  for (int i = 0; i < n; i++) CHECK_EQ(pthread_create(&t[i], NULL, churn_worker_, &c), 0);
  pthread_barrier_wait(&c.bar);
  for (int i = 0; i < n; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  CHECK_EQ(pthread_barrier_destroy(&c.bar), 0);
  CHECK_EQ(c.count, 200L * n);
}

#endif
