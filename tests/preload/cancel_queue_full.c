// pthread_cancel when the kernel cannot queue the cancellation signal.
//
// glibc cancels a thread by sending it SIGCANCEL (a real-time signal): up
// to 2.40 only a thread in asynchronous mode (its own choice, or inside a
// cancellable call, which glibc runs in that mode), from 2.41 every thread
// with cancellation enabled. When the user's queue of pending signals is
// full (RLIMIT_SIGPENDING, here set to 0 on the process itself) tgkill
// fails with EAGAIN and pthread_cancel returns that error. Then, up to
// 2.40, nothing is pending (a later pthread_cancel signals again); from
// 2.41 the thread is marked canceled but not interrupted: it acts at its
// next cancellation point, and a later pthread_cancel sends nothing.
//
// For threads blocked in read() on a pipe, a condition variable wait,
// nanosleep, waitpid and fcntl(F_OFD_SETLKW), and computing in a loop:
//   queue open: pthread_cancel returns 0 and the thread is canceled where
//     it is (nothing releases it);
//   queue full: the first pthread_cancel returns what glibc returns (a
//     computing thread must go on computing after an error); then the
//     limit is restored, a second pthread_cancel is made, the thread's
//     call is released (data, a broadcast, a signal, the child's exit, the
//     unlock, a flag), and the thread, which calls pthread_testcancel
//     after its call, must end canceled.
// The threads are of the asynchronous type: glibc of every version then
// signals them wherever they are. Deferred-type threads are only signalled
// from 2.41 on whether or not they have reached their call yet (up to 2.40
// the answer depends on that, which a program cannot see): run there only.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

enum { K_READ, K_COND, K_SLEEP, K_WAITPID, K_LOCK, K_COMPUTE, K_COUNT };
static const char* const kind_name[K_COUNT] = {"read", "cond", "nanosleep", "waitpid", "ofd_setlkw", "compute"};

static int kind, async_type;
static volatile int started, stop;
static volatile uint64_t counter;
static int pipefd[2];  // read: the thread's pipe; waitpid: the child's
static pid_t child;
static int lockfd[2];  // two open file descriptions of one file
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go;

static void on_usr1(int sig) { (void)sig; }

static void unlock_mu(void* arg) { pthread_mutex_unlock((pthread_mutex_t*)arg); }

static struct flock lock_of(short type) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  return fl;
}

static void set_type(void) {
  int old;
  CHECK_EQ(pthread_setcanceltype(async_type ? PTHREAD_CANCEL_ASYNCHRONOUS : PTHREAD_CANCEL_DEFERRED, &old), 0);
  __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
}

static void* thread_main(void* arg) {
  (void)arg;
  // The condition variable's thread takes its mutex and pushes the
  // cleanup that releases it first: an asynchronous cancellation between
  // the lock and the push would end it holding the mutex.
  if (kind != K_COND) set_type();
  switch (kind) {
    case K_READ: {
      char c;
      (void)!read(pipefd[0], &c, 1);
      break;
    }
    case K_COND:
      pthread_mutex_lock(&mu);
      pthread_cleanup_push(unlock_mu, &mu);
      set_type();
      while (!go) pthread_cond_wait(&cv, &mu);
      pthread_cleanup_pop(1);
      break;
    case K_SLEEP: {
      struct timespec ts = {1000000, 0};
      nanosleep(&ts, NULL);
      break;
    }
    case K_WAITPID:
      waitpid(child, NULL, 0);
      break;
    case K_LOCK: {
      struct flock fl = lock_of(F_WRLCK);
      fcntl(lockfd[1], F_OFD_SETLKW, &fl);
      break;
    }
    case K_COMPUTE: {
      uint64_t x = 1;
      while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __atomic_store_n(&counter, counter + 1, __ATOMIC_RELEASE);
      }
      (void)x;
      break;
    }
  }
  pthread_testcancel();
  return (void*)1;
}

static const char* err_name(int e) {
  switch (e) {
    case 0: return "0";
    case EAGAIN: return "EAGAIN";
    case ESRCH: return "ESRCH";
    default: return "other";
  }
}

static void setup(void) {
  started = stop = 0;
  counter = 0;
  go = 0;
  switch (kind) {
    case K_READ:
      CHECK_EQ(pipe(pipefd), 0);
      break;
    case K_WAITPID:
      CHECK_EQ(pipe(pipefd), 0);
      child = fork();
      CHECK(child >= 0, "fork");
      if (child == 0) {
        char c;
        close(pipefd[1]);
        (void)!read(pipefd[0], &c, 1);
        _exit(0);
      }
      close(pipefd[0]);
      break;
    case K_LOCK: {
      char path[] = "/tmp/cancel_queue_full.XXXXXX";
      lockfd[0] = mkstemp(path);
      CHECK(lockfd[0] >= 0, "mkstemp");
      lockfd[1] = open(path, O_RDWR);
      CHECK(lockfd[1] >= 0, "open");
      unlink(path);
      struct flock fl = lock_of(F_WRLCK);
      CHECK_EQ(fcntl(lockfd[0], F_OFD_SETLK, &fl), 0);
      break;
    }
    default:
      break;
  }
}

// Ends the thread's call the way its kind allows.
static void release(pthread_t th) {
  switch (kind) {
    case K_READ:
      CHECK_EQ(write(pipefd[1], "x", 1), 1);
      break;
    case K_COND:
      pthread_mutex_lock(&mu);
      go = 1;
      pthread_cond_broadcast(&cv);
      pthread_mutex_unlock(&mu);
      break;
    case K_SLEEP:
      pthread_kill(th, SIGUSR1);  // the thread may have ended: not checked
      break;
    case K_WAITPID:
      CHECK_EQ(write(pipefd[1], "x", 1), 1);
      break;
    case K_LOCK: {
      struct flock fl = lock_of(F_UNLCK);
      CHECK_EQ(fcntl(lockfd[0], F_OFD_SETLK, &fl), 0);
      break;
    }
    case K_COMPUTE:
      __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
      break;
  }
}

static void teardown(void) {
  switch (kind) {
    case K_READ:
      close(pipefd[0]);
      close(pipefd[1]);
      break;
    case K_WAITPID:
      close(pipefd[1]);  // the child ends (EOF) if it was never released
      waitpid(child, NULL, 0);  // unless the thread reaped it
      break;
    case K_LOCK:
      close(lockfd[0]);
      close(lockfd[1]);
      break;
    default:
      break;
  }
}

static void run(int k, int async, int full, const struct rlimit* open_limit) {
  kind = k;
  async_type = async;
  setup();
  pthread_t th;
  CHECK_EQ(pthread_create(&th, NULL, thread_main, NULL), 0);
  while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE)) sched_yield();
  if (k == K_COMPUTE)
    while (__atomic_load_n(&counter, __ATOMIC_ACQUIRE) == 0) sched_yield();
  int r1 = pthread_cancel(th), r2 = -1;
  if (full) {
    if (r1 != 0 && k == K_COMPUTE) {
      // Not canceled: it goes on computing.
      uint64_t c0 = __atomic_load_n(&counter, __ATOMIC_ACQUIRE);
      while (__atomic_load_n(&counter, __ATOMIC_ACQUIRE) == c0) sched_yield();
    }
    CHECK_EQ(setrlimit(RLIMIT_SIGPENDING, open_limit), 0);
    r2 = pthread_cancel(th);
    release(th);
  }
  void* ret;
  CHECK_EQ(pthread_join(th, &ret), 0);
  teardown();
  if (full) {
    struct rlimit rl = *open_limit;
    rl.rlim_cur = 0;
    CHECK_EQ(setrlimit(RLIMIT_SIGPENDING, &rl), 0);
  }
  printf("%s %s, queue %s: first %s", kind_name[k], async ? "async" : "deferred", full ? "full" : "open",
         err_name(r1));
  if (full) printf(", second %s", err_name(r2));
  printf(", %s\n", ret == PTHREAD_CANCELED ? "canceled" : "not canceled");
  fflush(stdout);
  CHECK(ret == PTHREAD_CANCELED, "%s: the thread was not canceled", kind_name[k]);
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;  // no SA_RESTART: nanosleep ends with EINTR
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  int major = 0, minor = 0;
  sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor);
  int deferred_too = major > 2 || (major == 2 && minor >= 41);
  struct rlimit open_limit;
  CHECK_EQ(getrlimit(RLIMIT_SIGPENDING, &open_limit), 0);
  for (int full = 0; full <= 1; full++) {
    if (full) {
      struct rlimit rl = open_limit;
      rl.rlim_cur = 0;
      CHECK_EQ(setrlimit(RLIMIT_SIGPENDING, &rl), 0);
    }
    for (int k = 0; k < K_COUNT; k++) {
      run(k, 1, full, &open_limit);
      if (deferred_too && k != K_COMPUTE) run(k, 0, full, &open_limit);
    }
  }
  if (!deferred_too) printf("deferred type: glibc before 2.41, not run\n");
  return 0;
}
