/* A thread dlopens a module (mod_cancel_ctor) with its deferred
 * cancellation pending: the module's constructor calls a cancellation
 * point, and the thread is unwound out of dlopen. The module stays loaded
 * (glibc set up its TLS before running constructors): every thread, those
 * that existed before the dlopen and those created after, sees its
 * initial-exec and dynamic TLS variables at their initial values and keeps
 * its own copy.
 * glibc's loader lock stays held by the canceled thread (it unwound out of
 * the section it holds it in): nothing here may call dlsym, dlopen or
 * exit's destructors afterwards; the module's functions come from a table
 * its constructor fills, and the program ends with _exit.
 * Before glibc 2.34 (Debian 11's 2.31), a thread's first access to a
 * module's dynamic TLS variable (__tls_get_addr's slow path, for a module
 * that also has static TLS) takes that same loader lock: natively every
 * such read waits for ever after the cancellation. There the dynamic TLS
 * variable is not read (the initial-exec one, the constructor and the
 * cancellation are checked as everywhere). */
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

#define OLD 8
#define NEW 8

/* After the cancellation exit() would wait for the loader's lock: a failed
 * check ends the process with _exit. */
#define LATE_CHECK(cond, ...)                                               \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
      fprintf(stderr, __VA_ARGS__);                                         \
      fprintf(stderr, "\n");                                                \
      _exit(1);                                                             \
    }                                                                       \
  } while (0)

struct mod_fns {
  int (*get_ie)(void);
  void (*set_ie)(int);
  int (*get_gd)(void);
  int (*ctor_runs)(void);
};
static struct mod_fns fns;
static char path[PATH_MAX + 32];
static int gate[2], go[2];
static volatile int ready, noted, dlopen_returned;
/* glibc >= 2.34: reading the module's dynamic TLS does not take the
   loader's lock (see the top of the file). */
static int read_gd;

static void note(void *a) {
  (void)a;
  noted = 1;
}

static void *loader(void *a) {
  (void)a;
  char c;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
  __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
  CHECK_EQ(read(gate[0], &c, 1), 1);
  pthread_cleanup_push(note, NULL);
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
  dlopen(path, RTLD_NOW);
  dlopen_returned = 1;
  pthread_cleanup_pop(0);
  return NULL;
}

/* Reads the module's TLS: initial values, then its own copy. */
static void *worker(void *arg) {
  long id = (long)arg, bad = 0;
  char c;
  if (id <= OLD) LATE_CHECK(read(go[0], &c, 1) == 1, "read"); /* an old thread: waits for the load */
  if (fns.get_ie() != 1234) bad++;
  if (read_gd && fns.get_gd() != 5678) bad++;
  fns.set_ie((int)id);
  for (int i = 0; i < 20; i++) {
    sched_yield();
    if (fns.get_ie() != (int)id) bad++;
  }
  return (void *)bad;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int gmaj = 0, gmin = 0;
  sscanf(gnu_get_libc_version(), "%d.%d", &gmaj, &gmin);
  read_gd = gmaj > 2 || (gmaj == 2 && gmin >= 34);
  char exe[PATH_MAX];
  if (argc > 0 && strchr(argv[0], '/')) { /* (also when run by an explicit ld.so) */
    snprintf(exe, sizeof exe, "%s", argv[0]);
  } else {
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0, "readlink");
    exe[n] = 0;
  }
  snprintf(path, sizeof path, "%s/mod_cancel_ctor.so", dirname(exe));
  char slot[32];
  snprintf(slot, sizeof slot, "%lx", (unsigned long)(uintptr_t)&fns);
  CHECK_EQ(setenv("MOD_CANCEL_CTOR_SLOT", slot, 1), 0);
  CHECK_EQ(pipe(gate), 0);
  CHECK_EQ(pipe(go), 0);
  pthread_t t[OLD + NEW + 1];
  for (long i = 1; i <= OLD; i++) CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)i), 0);

  pthread_t l;
  CHECK_EQ(pthread_create(&l, NULL, loader, NULL), 0);
  wait_flag(&ready);
  CHECK_EQ(pthread_cancel(l), 0);
  CHECK_EQ(write(gate[1], "g", 1), 1);
  void *r;
  LATE_CHECK(pthread_join(l, &r) == 0, "join");
  LATE_CHECK(r == PTHREAD_CANCELED, "the loading thread returned %p", r);
  LATE_CHECK(noted, "no cleanup handler ran");
  LATE_CHECK(!dlopen_returned, "dlopen returned");
  LATE_CHECK(fns.get_ie && fns.set_ie && fns.get_gd && fns.ctor_runs, "the constructor did not run");
  LATE_CHECK(fns.ctor_runs() == 1, "the constructor ran %d times", fns.ctor_runs());
  printf("dlopen: canceled in the module's constructor\n");

  for (int i = 0; i < OLD; i++) LATE_CHECK(write(go[1], "g", 1) == 1, "write");
  for (long i = OLD + 1; i <= OLD + NEW; i++)
    LATE_CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0, "pthread_create");
  long bad = 0;
  for (int i = 1; i <= OLD + NEW; i++) {
    LATE_CHECK(pthread_join(t[i], &r) == 0, "join");
    bad += (long)r;
  }
  LATE_CHECK(bad == 0, "%ld wrong TLS reads of the module's variables", bad);
  LATE_CHECK(fns.get_ie() == 1234, "main: %d", fns.get_ie());
  if (read_gd) LATE_CHECK(fns.get_gd() == 5678, "main: %d", fns.get_gd());
  printf("its TLS%s correct in %d threads that existed before and %d created after, and main\n",
         read_gd ? "" : " (initial-exec only: glibc < 2.34)", OLD, NEW);
  fflush(stdout);
  _exit(0);
}
