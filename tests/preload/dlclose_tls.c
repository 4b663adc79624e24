/* A module with initial-exec TLS (mod_ietls) is loaded, used, unloaded and
 * loaded again while threads live across all of it:
 * - after the first dlopen, the old threads see the initial value (1234)
 *   and each sets its own;
 * - after dlclose, threads are created and joined (the module is gone:
 *   nothing may read its image any more);
 * - after the second dlopen (a fresh instance of the module, glibc set up
 *   its TLS anew in every thread), the old threads and new ones see the
 *   initial value again, not what they set in the first instance. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

#define OLD 6
#define CHURN 16

static pthread_barrier_t phase;
static int (*get_ie)(void);
static void (*set_ie)(int);

static void *old_thread(void *arg) {
  long id = (long)arg, bad = 0;
  pthread_barrier_wait(&phase); /* 1: first instance loaded */
  if (get_ie() != 1234) bad++;
  set_ie((int)id);
  if (get_ie() != (int)id) bad++;
  pthread_barrier_wait(&phase); /* 2: done with the first instance */
  pthread_barrier_wait(&phase); /* 3: second instance loaded */
  if (get_ie() != 1234) bad++;
  set_ie((int)id + 100);
  if (get_ie() != (int)id + 100) bad++;
  return (void *)bad;
}

static void *short_thread(void *arg) {
  (void)arg;
  return NULL;
}

static void *new_thread(void *arg) {
  (void)arg;
  return (void *)(long)(get_ie() != 1234);
}

static void *load(const char *path) {
  void *h = dlopen(path, RTLD_NOW);
  CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
  get_ie = (int (*)(void))dlsym(h, "get_ie");
  set_ie = (void (*)(int))dlsym(h, "set_ie");
  CHECK(get_ie && set_ie, "dlsym");
  return h;
}

int main(void) {
  char exe[PATH_MAX], path[PATH_MAX + 32];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0, "readlink");
  exe[n] = 0;
  snprintf(path, sizeof path, "%s/mod_ietls.so", dirname(exe));

  pthread_barrier_init(&phase, NULL, OLD + 1);
  pthread_t t[OLD], c[CHURN];
  for (long i = 0; i < OLD; i++) CHECK_EQ(pthread_create(&t[i], NULL, old_thread, (void *)(i + 1)), 0);
  /* Threads that end before the load: their blocks are recycled later. */
  for (int i = 0; i < CHURN; i++) CHECK_EQ(pthread_create(&c[i], NULL, short_thread, NULL), 0);
  for (int i = 0; i < CHURN; i++) CHECK_EQ(pthread_join(c[i], NULL), 0);

  void *h = load(path);
  pthread_barrier_wait(&phase); /* 1 */
  pthread_barrier_wait(&phase); /* 2 */
  get_ie = NULL;
  set_ie = NULL;
  CHECK_EQ(dlclose(h), 0);
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < CHURN; i++) CHECK_EQ(pthread_create(&c[i], NULL, short_thread, NULL), 0);
    for (int i = 0; i < CHURN; i++) CHECK_EQ(pthread_join(c[i], NULL), 0);
  }

  h = load(path);
  long bad = 0;
  for (int i = 0; i < CHURN; i++) CHECK_EQ(pthread_create(&c[i], NULL, new_thread, NULL), 0);
  for (int i = 0; i < CHURN; i++) {
    void *r;
    CHECK_EQ(pthread_join(c[i], &r), 0);
    bad += (long)r;
  }
  pthread_barrier_wait(&phase); /* 3 */
  for (int i = 0; i < OLD; i++) {
    void *r;
    CHECK_EQ(pthread_join(t[i], &r), 0);
    bad += (long)r;
  }
  CHECK(bad == 0, "%ld wrong reads of the module's initial-exec TLS", bad);
  CHECK_EQ(dlclose(h), 0);
  printf("dlclose_tls: %d old threads and %d new ones across dlopen, dlclose, dlopen\n", OLD, CHURN);
  return 0;
}
