/* Kernel threads stay bounded across bursts of blocking calls: 30 threads
 * wait in waitpid at once (each blocked call may need its own kernel
 * thread), then a second burst reuses the kernel threads of the first.
 * Each burst's kernel threads are counted at their peak (sampled until
 * every call has returned), not at one instant, which raced with threads
 * still on their way into waitpid. The reuse is checked where the runner
 * expects user-level threads (MAX_KERNEL_THREADS set); with kernel threads
 * (natively, goshim's 1:1 mode) each thread has its own, and no burst has
 * more. */
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define BURST 30
extern char **environ;
static volatile int waiting, finished;

static void *waiter(void *arg) {
  pid_t pid;
  char *argv[] = {"sleep", "0.3", NULL};
  CHECK_EQ(posix_spawnp(&pid, "sleep", NULL, NULL, argv, environ), 0);
  __atomic_add_fetch(&waiting, 1, __ATOMIC_SEQ_CST);
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  __atomic_add_fetch(&finished, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

static int burst(void) {
  pthread_t t[BURST];
  waiting = 0;
  finished = 0;
  for (int i = 0; i < BURST; i++) CHECK_EQ(pthread_create(&t[i], NULL, waiter, NULL), 0);
  while (waiting < BURST) sched_yield();
  int k = 0;
  while (__atomic_load_n(&finished, __ATOMIC_SEQ_CST) < BURST) {
    int n = kernel_threads();
    if (n > k) k = n;
    usleep(10 * 1000);
  }
  const char *lim = getenv("MAX_KERNEL_THREADS");
  if (lim) CHECK(k <= atoi(lim) + BURST, "%d kernel threads for %d blocked calls", k, BURST);
  for (int i = 0; i < BURST; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  return k;
}

int main(void) {
  int k1 = burst();
  int after = kernel_threads();
  int k2 = burst();
  fprintf(stderr, "kernel threads: burst 1 %d, between %d, burst 2 %d\n", k1, after, k2);
  if (getenv("MAX_KERNEL_THREADS")) {
    /* user-level threads (the runner expects an M:N runtime): the second
       burst reuses the kernel threads of the first */
    CHECK(k2 <= k1 + 2, "the second burst needed new kernel threads: %d after %d", k2, k1);
  } else {
    /* kernel threads: one per thread (their peaks, sampled, vary with
       when each thread ends), none beyond */
    CHECK(k1 <= BURST + 1 && k2 <= BURST + 1, "bursts of %d threads had %d and %d kernel threads",
          BURST, k1, k2);
  }
  printf("kernel threads bounded across bursts of blocking calls\n");
  return 0;
}
