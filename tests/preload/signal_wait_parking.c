// A signal sent to a thread as it goes back into a wait must end up in
// its handler while the thread waits.
//
// Three threads wait over and over, each in a wait of its own kind:
// syscall(SYS_futex, FUTEX_WAIT), sem_wait and pthread_cond_wait, on
// objects nobody ever posts or signals until the end. The main thread
// sends them SIGUSR2 with pthread_kill in turn, NROUND times each, and
// after each send reads the byte the handler writes to a pipe (the
// handler does nothing else): each signal must run the handler once on
// its thread, which natively it does at once whatever the thread is doing
// (in the wait, or on its way back into it after the previous handler).
// A signal made pending on a thread at the moment it parked, and never
// delivered, shows as a read that waits: bounded by READ_TIMEOUT_MS so
// that the failure says which thread and round.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

#define NT 3
#define NROUND 15000
#define READ_TIMEOUT_MS 20000

static pthread_t th[NT];
static volatile int started[NT];
static volatile int stop;
static int futex_word;
static sem_t sem;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pfd[2];
static __thread int me = -1;
static volatile long wrong_thread;

static void on_usr2(int sig) {
  (void)sig;
  int saved = errno;
  if (me < 0) wrong_thread++;
  char c = (char)me;
  if (write(pfd[1], &c, 1) != 1) wrong_thread++;
  errno = saved;
}

static void *waiter(void *arg) {
  me = (int)(long)arg;
  __atomic_store_n(&started[me], 1, __ATOMIC_SEQ_CST);
  while (!__atomic_load_n(&stop, __ATOMIC_SEQ_CST)) {
    if (me == 0) {
      syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    } else if (me == 1) {
      sem_wait(&sem);
    } else {
      pthread_mutex_lock(&mu);
      if (!__atomic_load_n(&stop, __ATOMIC_SEQ_CST)) pthread_cond_wait(&cv, &mu);
      pthread_mutex_unlock(&mu);
    }
  }
  return NULL;
}

int main(void) {
  CHECK(pipe(pfd) == 0, "pipe");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr2;
  sa.sa_flags = SA_RESTART;
  CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
  CHECK(sem_init(&sem, 0, 0) == 0, "sem_init");
  for (long i = 0; i < NT; i++) CHECK(pthread_create(&th[i], NULL, waiter, (void *)i) == 0, "create");
  for (int i = 0; i < NT; i++) wait_flag(&started[i]);
  for (int r = 0; r < NROUND; r++) {
    for (int i = 0; i < NT; i++) {
      CHECK(pthread_kill(th[i], SIGUSR2) == 0, "pthread_kill");
      struct pollfd p = {pfd[0], POLLIN, 0};
      int n;
      do n = poll(&p, 1, READ_TIMEOUT_MS); while (n < 0 && errno == EINTR);
      CHECK(n == 1, "round %d: thread %d (%s) did not run its handler in %d s", r, i,
            i == 0 ? "futex" : i == 1 ? "sem_wait" : "pthread_cond_wait", READ_TIMEOUT_MS / 1000);
      char c;
      CHECK(read(pfd[0], &c, 1) == 1, "read");
      CHECK(c == i, "round %d: the handler for thread %d ran on thread %d", r, i, c);
    }
  }
  __atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&futex_word, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  sem_post(&sem);
  pthread_mutex_lock(&mu);
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < NT; i++) CHECK(pthread_join(th[i], NULL) == 0, "join");
  CHECK(wrong_thread == 0, "%ld handler runs off the waiters", wrong_thread);
  printf("%d waiters x %d signals: each handler ran on its thread\n", NT, NROUND);
  return 0;
}
