/* A threaded program run with MALLOC_CONF=background_thread:true in its
 * environment (jemalloc's option to purge from background threads of its
 * own; glibc's malloc ignores the variable): it re-executes itself with the
 * variable set when it is not. The process must start (jemalloc starts its
 * first background thread in a constructor, holding its own lock, and
 * glibc's pthread_create allocates there), 100 threads must each allocate,
 * fill, check and free blocks of many sizes and be joined, and a forked
 * child must allocate from a new thread and exit. When the process's malloc
 * is jemalloc (its mallctl is then found with dlsym) the background threads
 * must be on, as the variable asks. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define NTHREADS 100
#define ROUNDS 200

typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);

static void *worker(void *a) {
  uintptr_t id = (uintptr_t)a;
  uint64_t sum = 0;
  void *keep[8] = {0};
  for (int r = 0; r < ROUNDS; r++) {
    size_t n = 16 + (size_t)((id * 131 + (uintptr_t)r * 977) % 40000);
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    memset(p, (int)(id + (uintptr_t)r) & 0xff, n);
    for (size_t i = 0; i < n; i += 512) sum += p[i];
    sum += p[n - 1];
    /* Some blocks live on across rounds, and are freed out of order. */
    int k = r % 8;
    free(keep[k]);
    keep[k] = p;
  }
  for (int k = 0; k < 8; k++) free(keep[k]);
  return (void *)(uintptr_t)sum;
}

static uint64_t expected(uintptr_t id) {
  uint64_t sum = 0;
  for (int r = 0; r < ROUNDS; r++) {
    size_t n = 16 + (size_t)((id * 131 + (uintptr_t)r * 977) % 40000);
    uint64_t b = (uint64_t)((id + (uintptr_t)r) & 0xff);
    sum += b * ((n + 511) / 512) + b;
  }
  return sum;
}

int main(int argc, char **argv) {
  (void)argc;
  const char *mc = getenv("MALLOC_CONF");
  if (!mc || strcmp(mc, "background_thread:true") != 0) {
    CHECK_EQ(setenv("MALLOC_CONF", "background_thread:true", 1), 0);
    execv("/proc/self/exe", argv);
    CHECK(0, "execv /proc/self/exe failed");
  }
  setvbuf(stdout, NULL, _IOLBF, 0);

  mallctl_fn mallctl_p = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  if (mallctl_p) {
    bool bg = false;
    size_t len = sizeof bg;
    CHECK_EQ(mallctl_p("background_thread", &bg, &len, NULL, 0), 0);
    CHECK(bg, "MALLOC_CONF=background_thread:true, yet the background threads are off");
  }

  pthread_t t[NTHREADS];
  for (uintptr_t i = 0; i < NTHREADS; i++)
    CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)i), 0);
  int bad = 0;
  for (uintptr_t i = 0; i < NTHREADS; i++) {
    void *r;
    CHECK_EQ(pthread_join(t[i], &r), 0);
    if ((uint64_t)(uintptr_t)r != expected(i)) bad++;
  }
  CHECK(bad == 0, "%d threads computed a wrong sum", bad);
  printf("%d threads allocated and freed %d blocks each\n", NTHREADS, ROUNDS);

  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    pthread_t c;
    void *r;
    if (pthread_create(&c, NULL, worker, (void *)(uintptr_t)7) != 0) _exit(2);
    if (pthread_join(c, &r) != 0) _exit(3);
    _exit((uint64_t)(uintptr_t)r == expected(7) ? 0 : 4);
  }
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked child ended with status %#x", st);
  printf("a forked child allocated from a new thread\n");
  return 0;
}
