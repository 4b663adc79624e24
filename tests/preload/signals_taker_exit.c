/* A signal the process sends itself (kill) while the only thread that
 * leaves it unblocked is about to exit: main blocks the signal, a new
 * thread unblocks it and waits for main's word to exit; main kills itself,
 * then gives the word. The kernel marks the signal for that thread when
 * kill is called, and the thread takes it at its next return from the
 * kernel, which comes before it can see the word: the handler has always
 * run, on that thread, by the time pthread_join returns, and nothing is
 * left pending. Three ways of waiting for the word:
 *   read    blocked in read() on a pipe;
 *   cond    in pthread_cond_wait;
 *   spin    running, a system call (getppid, made by the program itself)
 *           in every round and one more after the word.
 * Each round alternates SIGUSR1 and SIGRTMIN. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "common.h"

static volatile sig_atomic_t hits;
static pthread_t handler_thread;
static void on_sig(int sig) {
  (void)sig;
  hits++;
  handler_thread = pthread_self();
}

enum { W_READ, W_COND, W_SPIN };
static int mode;
static int ready[2], go[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int word;
static atomic_int spin_word;
static sigset_t sigs;

static long raw_getppid(void) {
#if defined(__x86_64__)
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "0"(110L) : "rcx", "r11", "memory");
  return r;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = 173; /* getppid */
  register long x0 __asm__("x0");
  __asm__ volatile("svc #0" : "=r"(x0) : "r"(x8) : "memory");
  return x0;
#else
#error "raw_getppid: add this architecture's system-call instruction"
#endif
}

static void *taker(void *arg) {
  (void)arg;
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &sigs, NULL), 0);
  char c = 1;
  CHECK_EQ(write(ready[1], &c, 1), 1);
  switch (mode) {
    case W_READ: {
      ssize_t n;
      while ((n = read(go[0], &c, 1)) < 0 && errno == EINTR) {
      }
      CHECK_EQ(n, 1);
      break;
    }
    case W_COND:
      pthread_mutex_lock(&mu);
      while (!word) pthread_cond_wait(&cv, &mu);
      pthread_mutex_unlock(&mu);
      break;
    case W_SPIN:
      while (!atomic_load(&spin_word)) raw_getppid();
      raw_getppid();
      break;
  }
  return NULL;
}

static void round_trip(int sig, int i) {
  word = 0;
  atomic_store(&spin_word, 0);
  int before = hits;
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, taker, NULL), 0);
  char c;
  CHECK_EQ(read(ready[0], &c, 1), 1);
  CHECK_EQ(kill(getpid(), sig), 0);
  switch (mode) {
    case W_READ:
      CHECK_EQ(write(go[1], &c, 1), 1);
      break;
    case W_COND:
      pthread_mutex_lock(&mu);
      word = 1;
      pthread_cond_signal(&cv);
      pthread_mutex_unlock(&mu);
      break;
    case W_SPIN:
      atomic_store(&spin_word, 1);
      break;
  }
  CHECK_EQ(pthread_join(t, NULL), 0);
  sigset_t p;
  CHECK_EQ(sigpending(&p), 0);
  CHECK(hits == before + 1 && !sigismember(&p, sig),
        "mode %d round %d: signal %d: handler ran %d times before the thread exited, %s pending", mode, i,
        sig, hits - before, sigismember(&p, sig) ? "still" : "not");
  CHECK(pthread_equal(handler_thread, t), "mode %d round %d: the handler ran on another thread", mode, i);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sig;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(sigaction(SIGRTMIN, &sa, NULL), 0);
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGUSR1);
  sigaddset(&sigs, SIGRTMIN);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &sigs, NULL), 0);
  CHECK_EQ(pipe(ready), 0);
  CHECK_EQ(pipe(go), 0);
  static const char *names[] = {"read", "cond", "spin"};
  for (mode = W_READ; mode <= W_SPIN; mode++) {
    for (int i = 0; i < rounds; i++) round_trip(i % 2 ? SIGRTMIN : SIGUSR1, i);
    printf("%s: %d rounds ok\n", names[mode], rounds);
  }
  return 0;
}
