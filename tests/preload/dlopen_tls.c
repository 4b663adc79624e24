/* A module with initial-exec TLS dlopen'ed while threads exist: every
 * thread, old and new, sees the module's initial values and its own copy. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include "common.h"

#define OLD 50
static volatile int loaded;
static int (*get_ie)(void);
static void (*set_ie)(int);

static void *worker(void *arg) {
  int id = (int)(long)arg;
  while (!loaded) sched_yield();
  int bad = 0;
  if (get_ie() != 1234) bad++;
  set_ie(id);
  for (int i = 0; i < 20; i++) {
    sched_yield();
    if (get_ie() != id) bad++;
  }
  return (void *)(long)bad;
}

int main(void) {
  pthread_t t[OLD * 2];
  for (long i = 0; i < OLD; i++) CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(i + 1)), 0);
  for (int i = 0; i < 20; i++) sched_yield();
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0, "readlink");
  exe[n] = 0;
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/mod_ietls.so", dirname(exe));
  void *h = dlopen(path, RTLD_NOW);
  CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
  get_ie = (int (*)(void))dlsym(h, "get_ie");
  set_ie = (void (*)(int))dlsym(h, "set_ie");
  CHECK(get_ie && set_ie, "dlsym");
  CHECK_EQ(get_ie(), 1234);
  loaded = 1;
  for (long i = OLD; i < 2 * OLD; i++) CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(i + 1)), 0);
  long bad = 0;
  for (int i = 0; i < 2 * OLD; i++) {
    void *r;
    CHECK_EQ(pthread_join(t[i], &r), 0);
    bad += (long)r;
  }
  CHECK(bad == 0, "%ld wrong initial-exec TLS reads", bad);
  CHECK_EQ(get_ie(), 1234);
  printf("initial-exec TLS of a dlopen'ed module correct in %d threads\n", 2 * OLD);
  return 0;
}
