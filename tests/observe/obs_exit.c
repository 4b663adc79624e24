/* Launcher tests: obs_exit CODE exits with CODE; obs_exit kill SIG kills
 * itself with SIG; obs_exit env NAME prints getenv(NAME); obs_exit stack
 * prints a new thread's stack size; obs_exit threads N keeps N threads
 * alive together for a moment and prints the kernel thread count;
 * obs_exit sleep MS sleeps MS milliseconds. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_barrier_t bar;

static void *stack_size(void *arg) {
  pthread_attr_t a;
  size_t sz = 0;
  pthread_getattr_np(pthread_self(), &a);
  pthread_attr_getstacksize(&a, &sz);
  pthread_attr_destroy(&a);
  *(size_t *)arg = sz;
  return NULL;
}

static void *hold(void *arg) {
  (void)arg;
  pthread_barrier_wait(&bar);
  pthread_barrier_wait(&bar);
  return NULL;
}

static int kthreads(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
  if (f) fclose(f);
  return n;
}

int main(int argc, char **argv) {
  if (argc < 2) return 0;
  if (strcmp(argv[1], "kill") == 0) {
    fflush(stdout);
    signal(atoi(argv[2]), SIG_DFL);
    raise(atoi(argv[2]));
    return 99;
  }
  if (strcmp(argv[1], "env") == 0) {
    const char *v = getenv(argv[2]);
    printf("%s\n", v ? v : "(unset)");
    return 0;
  }
  if (strcmp(argv[1], "stack") == 0) {
    pthread_t t;
    size_t sz = 0;
    pthread_create(&t, NULL, stack_size, &sz);
    pthread_join(t, NULL);
    printf("%zu\n", sz);
    return 0;
  }
  if (strcmp(argv[1], "sleep") == 0) {
    usleep(atoi(argv[2]) * 1000);
    return 0;
  }
  if (strcmp(argv[1], "threads") == 0) {
    int n = atoi(argv[2]);
    pthread_t *t = calloc(n, sizeof *t);
    pthread_barrier_init(&bar, NULL, n + 1);
    for (int i = 0; i < n; i++)
      if (pthread_create(&t[i], NULL, hold, NULL) != 0) return 1;
    pthread_barrier_wait(&bar);
    printf("kernel threads %d\n", kthreads());
    pthread_barrier_wait(&bar);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    return 0;
  }
  return atoi(argv[1]);
}
