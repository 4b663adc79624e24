/* 1,000 threads wait on one process-shared condvar in a shared mapping.
 * Phase 1: a child process (forked before the threads exist) hands out
 * 1,000 tokens, one pthread_cond_signal each; phase 2: this process does
 * the same; phase 3: the child again, with one pthread_cond_broadcast.
 * Every waiter must get its token (a lost cross-process wake-up hangs the
 * test), and while all of them wait the process must not hold a kernel
 * thread per waiter (check_kernel_threads: MAX_KERNEL_THREADS under
 * goshim). */
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define N 1000

struct shared {
  pthread_mutex_t m;
  pthread_cond_t cv;      /* the waiters' condvar */
  pthread_cond_t main_cv; /* main waits here for the counters below */
  int tokens;
  int waiting, got;       /* of the current phase */
  int phase;              /* 1, 2, 3 */
  int released;           /* phase 3: set by the child's broadcast */
};
static struct shared *sh;

static void wait_tokens(int phase) {
  CHECK_EQ(pthread_mutex_lock(&sh->m), 0);
  while (sh->phase != phase) CHECK_EQ(pthread_cond_wait(&sh->cv, &sh->m), 0);
  if (++sh->waiting == N) CHECK_EQ(pthread_cond_signal(&sh->main_cv), 0);
  if (phase == 3) {
    while (!sh->released) CHECK_EQ(pthread_cond_wait(&sh->cv, &sh->m), 0);
  } else {
    while (sh->tokens == 0) CHECK_EQ(pthread_cond_wait(&sh->cv, &sh->m), 0);
    sh->tokens--;
  }
  if (++sh->got == N) CHECK_EQ(pthread_cond_signal(&sh->main_cv), 0);
  CHECK_EQ(pthread_mutex_unlock(&sh->m), 0);
}

static void *waiter(void *arg) {
  (void)arg;
  for (int phase = 1; phase <= 3; phase++) wait_tokens(phase);
  return NULL;
}

static void give_tokens(void) {
  for (int i = 0; i < N; i++) {
    CHECK_EQ(pthread_mutex_lock(&sh->m), 0);
    sh->tokens++;
    CHECK_EQ(pthread_cond_signal(&sh->cv), 0);
    CHECK_EQ(pthread_mutex_unlock(&sh->m), 0);
  }
}

/* Starts a phase and returns once all N threads wait in it. */
static void start_phase(int phase, const char *what) {
  CHECK_EQ(pthread_mutex_lock(&sh->m), 0);
  sh->waiting = sh->got = 0;
  sh->phase = phase;
  CHECK_EQ(pthread_cond_broadcast(&sh->cv), 0);
  while (sh->waiting < N) CHECK_EQ(pthread_cond_wait(&sh->main_cv, &sh->m), 0);
  CHECK_EQ(pthread_mutex_unlock(&sh->m), 0);
  check_kernel_threads(what);
}

static void wait_all_got(void) {
  CHECK_EQ(pthread_mutex_lock(&sh->m), 0);
  while (sh->got < N) CHECK_EQ(pthread_cond_wait(&sh->main_cv, &sh->m), 0);
  CHECK_EQ(sh->tokens, 0);
  CHECK_EQ(pthread_mutex_unlock(&sh->m), 0);
}

int main(void) {
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(sh != MAP_FAILED, "mmap");
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  CHECK_EQ(pthread_mutex_init(&sh->m, &ma), 0);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
  CHECK_EQ(pthread_cond_init(&sh->cv, &ca), 0);
  CHECK_EQ(pthread_cond_init(&sh->main_cv, &ca), 0);

  int go[2];
  CHECK_EQ(pipe(go), 0);
  pid_t child = fork();
  CHECK(child >= 0, "fork");
  if (child == 0) {
    char c;
    close(go[1]); /* a parent that fails and exits ends the child too */
    if (read(go[0], &c, 1) != 1) _exit(2);
    give_tokens(); /* phase 1 */
    if (read(go[0], &c, 1) != 1) _exit(2);
    CHECK_EQ(pthread_mutex_lock(&sh->m), 0); /* phase 3 */
    sh->released = 1;
    CHECK_EQ(pthread_cond_broadcast(&sh->cv), 0);
    CHECK_EQ(pthread_mutex_unlock(&sh->m), 0);
    _exit(0);
  }

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  static pthread_t t[N];
  for (int i = 0; i < N; i++) CHECK_EQ(pthread_create(&t[i], &attr, waiter, NULL), 0);

  start_phase(1, "1000 threads waiting on a pshared condvar (phase 1)");
  CHECK_EQ(write(go[1], "1", 1), 1);
  wait_all_got();

  start_phase(2, "1000 threads waiting on a pshared condvar (phase 2)");
  give_tokens();
  wait_all_got();

  start_phase(3, "1000 threads waiting on a pshared condvar (phase 3)");
  CHECK_EQ(write(go[1], "3", 1), 1);
  wait_all_got();

  for (int i = 0; i < N; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  int st;
  CHECK_EQ(waitpid(child, &st, 0), child);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %x", st);
  printf("%d waiters on a pshared condvar: tokens from another process (signal), from this "
         "process (signal), release from another process (broadcast)\n", N);
  return 0;
}
