// Holds many idle threads and reports the resident memory they cost.
//
//   obs_idle_memory N CEILING_BYTES
//
// N threads are created in three equal groups: readers blocked in read()
// on a few pipes and socketpairs (many readers per descriptor, so open
// files stay few), sleepers in clock_nanosleep with a deadline far away,
// and waiters in pthread_cond_wait. Every thread checks in before it
// blocks; once all have, the resident set is read from
// /proc/self/smaps_rollup and compared with the one before the first
// create: the growth divided by N must be at most CEILING_BYTES.
//
// Then the program must still answer: every reader gets one byte, every
// sleeper is interrupted by a signal (EINTR), every condvar waiter is
// released by a broadcast, and all N are joined. Prints
//   threads N rss_growth_bytes G per_thread B
// and "ok" on stdout; exits 1 with the reason on stderr otherwise.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kFds = 32 };  // pipes and socketpairs, each

static int pipes[kFds][2];
static int socks[kFds][2];
static atomic_long checked_in;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t all_in = PTHREAD_COND_INITIALIZER;
static int released;
static long n_total;
static atomic_long n_read, n_eintr, n_woken;

static void die(const char* what) {
  fprintf(stderr, "obs_idle_memory: %s: %s\n", what, strerror(errno));
  exit(1);
}

// have_mu: the caller holds mu already.
static void check_in(int have_mu) {
  if (atomic_fetch_add(&checked_in, 1) + 1 == n_total) {
    if (!have_mu) pthread_mutex_lock(&mu);
    pthread_cond_signal(&all_in);
    if (!have_mu) pthread_mutex_unlock(&mu);
  }
}

static void* reader(void* arg) {
  long i = (long)arg;
  int fd = (i / 3) % 2 ? pipes[(i / 6) % kFds][0] : socks[(i / 6) % kFds][1];
  check_in(0);
  char c;
  ssize_t r = read(fd, &c, 1);
  if (r != 1 || c != 'x') {
    fprintf(stderr, "obs_idle_memory: read returned %zd\n", r);
    exit(1);
  }
  atomic_fetch_add(&n_read, 1);
  return NULL;
}

static void* sleeper(void* arg) {
  (void)arg;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += 3600;
  check_in(0);
  int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL);
  if (r != EINTR) {
    fprintf(stderr, "obs_idle_memory: clock_nanosleep returned %d, not EINTR\n", r);
    exit(1);
  }
  atomic_fetch_add(&n_eintr, 1);
  return NULL;
}

static void* waiter(void* arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  check_in(1);
  while (!released) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  atomic_fetch_add(&n_woken, 1);
  return NULL;
}

static long rss_bytes(void) {
  FILE* f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) die("open /proc/self/smaps_rollup");
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Rss: %ld kB", &kb) == 1) break;
  fclose(f);
  if (kb < 0) {
    fprintf(stderr, "obs_idle_memory: no Rss line in smaps_rollup\n");
    exit(1);
  }
  return kb * 1024;
}

static void on_usr1(int sig) { (void)sig; }

static void write_all(int fd, long n) {
  char buf[4096];
  memset(buf, 'x', sizeof buf);
  while (n > 0) {
    ssize_t w = write(fd, buf, n < (long)sizeof buf ? (size_t)n : sizeof buf);
    if (w < 0) die("write");
    n -= w;
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: obs_idle_memory N CEILING_BYTES\n");
    return 2;
  }
  n_total = atol(argv[1]);
  long ceiling = atol(argv[2]);
  n_total -= n_total % 6;
  if (n_total <= 0) return 2;

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;  // no SA_RESTART: the sleep returns EINTR
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL)) die("sigaction");
  for (int i = 0; i < kFds; i++) {
    if (pipe(pipes[i])) die("pipe");
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, socks[i])) die("socketpair");
  }

  pthread_t* t = calloc(n_total, sizeof *t);
  if (!t) die("calloc");
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  long before = rss_bytes();
  for (long i = 0; i < n_total; i++) {
    void* (*fn)(void*) = i % 3 == 0 ? reader : i % 3 == 1 ? sleeper : waiter;
    int e = pthread_create(&t[i], &attr, fn, (void*)i);
    if (e) {
      errno = e;
      fprintf(stderr, "obs_idle_memory: pthread_create #%ld: %s\n", i, strerror(e));
      return 1;
    }
  }
  pthread_mutex_lock(&mu);
  while (atomic_load(&checked_in) < n_total) pthread_cond_wait(&all_in, &mu);
  pthread_mutex_unlock(&mu);
  // Every condvar waiter has released the mutex inside pthread_cond_wait
  // once we hold it; readers and sleepers checked in right before their
  // call. The figure is read while all of them are alive and idle.
  pthread_mutex_lock(&mu);
  long after = rss_bytes();
  pthread_mutex_unlock(&mu);
  long growth = after - before;
  long per = growth / n_total;
  printf("threads %ld rss_growth_bytes %ld per_thread %ld\n", n_total, growth, per);
  fflush(stdout);

  // Still answering: wake every group and join everyone.
  long per_fd = n_total / 6 / kFds, extra = n_total / 6 % kFds;
  for (int i = 0; i < kFds; i++) {
    write_all(pipes[i][1], per_fd + (i < extra));
    write_all(socks[i][0], per_fd + (i < extra));
  }
  pthread_mutex_lock(&mu);
  released = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  // Sleepers: signal each until its sleep has returned (a signal that
  // lands before the sleep starts is handled and the sleep goes on).
  for (;;) {
    long left = 0;
    for (long i = 1; i < n_total; i += 3) {
      if (!t[i]) continue;
      left++;
      pthread_kill(t[i], SIGUSR1);
    }
    if (!left) break;
    for (long i = 1; i < n_total; i += 3) {
      if (!t[i]) continue;
      if (pthread_tryjoin_np(t[i], NULL) == 0) t[i] = 0;
    }
    sched_yield();
  }
  for (long i = 0; i < n_total; i++) {
    if (i % 3 == 1) continue;
    if (pthread_join(t[i], NULL)) die("pthread_join");
  }
  long want = n_total / 3;
  if (n_read != want || n_eintr != want || n_woken != want) {
    fprintf(stderr, "obs_idle_memory: read %ld eintr %ld woken %ld, want %ld each\n",
            (long)n_read, (long)n_eintr, (long)n_woken, want);
    return 1;
  }
  if (per > ceiling) {
    fprintf(stderr, "obs_idle_memory: %ld bytes per idle thread, ceiling %ld\n", per, ceiling);
    return 1;
  }
  printf("ok\n");
  return 0;
}
