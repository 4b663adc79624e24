/* Idle-thread memory: N threads (default attributes), each checking in and
 * then blocking (on a condition variable, or in read() on a pipe that
 * main closes at the end). Once all have checked in, the resident memory
 * grown since before the first pthread_create, divided by N. The kernel's
 * own memory per thread (its stack, task struct) is not in RSS.
 *   idle_threads [threads=100000] [cond|read] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t checked_in = PTHREAD_COND_INITIALIZER, go_cv = PTHREAD_COND_INITIALIZER;
static int count, release, use_read;
static int pfd[2];

static long status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) v = atol(line + strlen(key));
  if (f) fclose(f);
  return v;
}

static void *idle(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  count++;
  pthread_cond_signal(&checked_in);
  if (!use_read)
    while (!release) pthread_cond_wait(&go_cv, &mu);
  pthread_mutex_unlock(&mu);
  if (use_read) {
    char c;
    if (read(pfd[0], &c, 1) != 0) abort(); /* EOF once main closes the write end */
  }
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100000;
  use_read = argc > 2 && strcmp(argv[2], "read") == 0;
  if (pipe(pfd)) return 1;
  pthread_t *t = malloc(sizeof(pthread_t) * n);
  long before = status_kb("VmRSS:");
  for (int i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, idle, NULL)) {
      fprintf(stderr, "pthread_create failed at %d\n", i);
      return 1;
    }
  pthread_mutex_lock(&mu);
  while (count < n) pthread_cond_wait(&checked_in, &mu);
  pthread_mutex_unlock(&mu);
  long after = status_kb("VmRSS:");
  pthread_mutex_lock(&mu);
  release = 1;
  pthread_cond_broadcast(&go_cv);
  pthread_mutex_unlock(&mu);
  close(pfd[1]);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  printf("RESULT %.0f bytes resident per idle thread (%d threads, %s)\n",
         (double)(after - before) * 1024 / n, n, use_read ? "read" : "cond");
  printf("RESULT %d idle threads\n", n);
  return 0;
}
