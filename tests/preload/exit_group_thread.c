/* syscall(SYS_exit_group, 7) from a thread while the others are blocked
 * (a condition variable, a pipe read, pthread_join) or computing: the
 * whole process ends at once with status 7. Nothing of exit() runs: the
 * atexit handler would print to stderr, and stdout's buffered last line
 * (stdout is a file here, fully buffered) is lost, natively as under
 * goshim. The process exit by the raw system call is what the kernel does,
 * so the output before it is fixed by handshakes and must be identical. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { WAITERS = 8 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready;
static int never;
static int fds[2];
static atomic_int spinning;

static void bye(void) { fprintf(stderr, "atexit handler ran: exit_group must skip it\n"); }

static void *cond_waiter(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  ready++;
  pthread_cond_broadcast(&cv);
  while (!never) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void *reader(void *arg) {
  (void)arg;
  char c;
  pthread_mutex_lock(&mu);
  ready++;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  if (read(fds[0], &c, 1) >= 0) fprintf(stderr, "read returned\n");
  return NULL;
}

static void *spinner(void *arg) {
  (void)arg;
  atomic_store(&spinning, 1);
  volatile unsigned long n = 0;
  for (;;) n++;
  return NULL;
}

static void *ender(void *arg) {
  (void)arg;
  printf("ending the process from a thread\n");
  fflush(stdout);
  printf("this buffered line is never written\n");
  syscall(SYS_exit_group, 7);
  fprintf(stderr, "exit_group returned\n");
  return NULL;
}

int main(void) {
  atexit(bye);
  if (pipe(fds)) return 1;
  pthread_t t;
  for (int i = 0; i < WAITERS; i++) {
    if (pthread_create(&t, NULL, cond_waiter, NULL)) return 1;
    if (pthread_create(&t, NULL, reader, NULL)) return 1;
  }
  pthread_mutex_lock(&mu);
  while (ready < 2 * WAITERS) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  if (pthread_create(&t, NULL, spinner, NULL)) return 1;
  while (!atomic_load(&spinning)) sched_yield();
  printf("%d threads waiting, one computing\n", 2 * WAITERS);
  fflush(stdout);
  pthread_t e;
  if (pthread_create(&e, NULL, ender, NULL)) return 1;
  pthread_join(e, NULL);
  fprintf(stderr, "pthread_join returned\n");
  return 1;
}
