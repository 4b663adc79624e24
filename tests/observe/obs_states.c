/* Threads left waiting in four ways, for the goroutine dump test: on a
 * mutex main holds, on a condition variable, in read() on a socket nobody
 * writes to, and in sleep(). Prints "ready" once it has started all four
 * and then waits for a signal; SIGTERM ends it. Under goshim the threads
 * are parked Gs with no state of their own in /proc: t_dump.sh learns that
 * they (and main, in sigwait) wait from the dump itself, and asks for
 * another dump until one shows them all. Built with -g so the dump can
 * name the functions below. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int sv[2];

__attribute__((noinline)) void *blocked_on_mutex(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

__attribute__((noinline)) void *blocked_on_cond(void *arg) {
  (void)arg;
  pthread_mutex_lock(&cmu);
  pthread_cond_wait(&cv, &cmu);
  pthread_mutex_unlock(&cmu);
  return NULL;
}

__attribute__((noinline)) void *blocked_in_read(void *arg) {
  (void)arg;
  char c;
  return read(sv[1], &c, 1) == 1 ? NULL : (void *)1;
}

__attribute__((noinline)) void *blocked_in_sleep(void *arg) {
  (void)arg;
  sleep(3600);
  return NULL;
}

int main(void) {
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  pthread_mutex_lock(&mu);
  pthread_t t[4];
  pthread_create(&t[0], NULL, blocked_on_mutex, NULL);
  pthread_create(&t[1], NULL, blocked_on_cond, NULL);
  pthread_create(&t[2], NULL, blocked_in_read, NULL);
  pthread_create(&t[3], NULL, blocked_in_sleep, NULL);
  printf("reading fd %d\n", sv[1]);
  printf("ready\n");
  fflush(stdout);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  int sig;
  sigwait(&set, &sig);
  return 0;
}
