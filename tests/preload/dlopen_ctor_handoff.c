/* A thread dlopens a module (mod_ctor_handoff) whose constructor hands a
 * task to a thread that existed before the dlopen (a mutex and condition
 * variable hand-off, no sleeps) and waits for its answer: the task reads
 * the module's initial-exec TLS variable there. glibc sets up the module's
 * TLS in every thread before it runs constructors, so both the old thread
 * and the loading thread (the constructor reads it too) see the initial
 * value, 4321. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

struct handoff {
  int (*run_on_old_thread)(int (*task)(void));
  int seen_by_old_thread;
  int seen_by_loader;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int (*task)(void);
static int answer, answered, quit;

static void *old_thread(void *a) {
  (void)a;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (!task && !quit) pthread_cond_wait(&cv, &mu);
    if (quit) break;
    int (*t)(void) = task;
    task = NULL;
    pthread_mutex_unlock(&mu);
    int v = t();
    pthread_mutex_lock(&mu);
    answer = v;
    answered = 1;
    pthread_cond_broadcast(&cv);
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* Runs t on the old thread and returns its result. */
static int run_on_old_thread(int (*t)(void)) {
  pthread_mutex_lock(&mu);
  answered = 0;
  task = t;
  pthread_cond_broadcast(&cv);
  while (!answered) pthread_cond_wait(&cv, &mu);
  int v = answer;
  pthread_mutex_unlock(&mu);
  return v;
}

static struct handoff ho = {run_on_old_thread, -1, -1};
static char path[PATH_MAX + 32];

static void *loader(void *a) {
  (void)a;
  void *h = dlopen(path, RTLD_NOW);
  CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
  return h;
}

int main(void) {
  char exe[PATH_MAX], slot[32];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0, "readlink");
  exe[n] = 0;
  snprintf(path, sizeof path, "%s/mod_ctor_handoff.so", dirname(exe));
  snprintf(slot, sizeof slot, "%lx", (unsigned long)(uintptr_t)&ho);
  CHECK_EQ(setenv("MOD_CTOR_HANDOFF_SLOT", slot, 1), 0);

  pthread_t old, ld;
  CHECK_EQ(pthread_create(&old, NULL, old_thread, NULL), 0);
  void *h;
  CHECK_EQ(pthread_create(&ld, NULL, loader, NULL), 0);
  CHECK_EQ(pthread_join(ld, &h), 0);
  CHECK(ho.seen_by_loader == 4321, "the constructor read its initial-exec TLS as %d in the loading thread",
        ho.seen_by_loader);
  CHECK(ho.seen_by_old_thread == 4321,
        "a thread that existed before the dlopen read the module's initial-exec TLS as %d during its constructor",
        ho.seen_by_old_thread);
  pthread_mutex_lock(&mu);
  quit = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  CHECK_EQ(pthread_join(old, NULL), 0);
  printf("dlopen_ctor_handoff: the constructor's thread and an old thread saw the initial value\n");
  return 0;
}
