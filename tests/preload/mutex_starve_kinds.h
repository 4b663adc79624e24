/* mutex_starve for the other mutex kinds: a thread that locks and unlocks
 * a mutex in a tight loop (the hog) must not keep another thread (the
 * contender) out of it. Included by mutex_starve_KIND.c, which defines
 * KIND:
 *   robust          a robust mutex
 *   pi              a priority-inheritance mutex
 *   robust_pi       both
 *   pshared         a process-shared mutex, hog and contender in this process
 *   pshared_robust  a process-shared robust mutex, the same
 *   pshared_fork    a process-shared mutex, the hog in a child process
 *   pp              a priority-protect mutex (SCHED_FIFO threads; skipped,
 *                   exit 77, when the process may not use SCHED_FIFO)
 *
 * The hog takes the mutex at most HOG_MAX times; the contender must take
 * it ROUNDS times while the hog still loops (each of its acquisitions
 * checks that the hog has not finished). A contender that is kept out
 * until the hog gives up fails the run, rather than hanging it. Mutual
 * exclusion is checked with a counter of holders; the mutex must be left
 * unlocked with no owner (trylock succeeds). For the robust kinds, the
 * hog's last acquisition is left held when the hog thread ends: the next
 * locker must get EOWNERDEAD, as natively. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define ROUNDS 10
#define HOG_MAX 20000000L

struct arena {
  pthread_mutex_t mu;
  long hog_rounds; /* atomic */
  int hog_done;    /* atomic: the hog finished its HOG_MAX rounds */
  int stop;        /* atomic: the contender is done */
  long inside;     /* holders right now */
  long others;     /* contender rounds */
  int starved;     /* the contender got the mutex only after the hog was done */
};
static struct arena *A;
static volatile unsigned sink;

static void enter(void) { CHECK_EQ(__atomic_add_fetch(&A->inside, 1, __ATOMIC_SEQ_CST), 1); }
static void leave(void) { __atomic_sub_fetch(&A->inside, 1, __ATOMIC_SEQ_CST); }

static void hog_loop(void) {
  long i;
  for (i = 0; i < HOG_MAX && !__atomic_load_n(&A->stop, __ATOMIC_ACQUIRE); i++) {
    CHECK_EQ(pthread_mutex_lock(&A->mu), 0);
    enter();
    unsigned x = sink;
    for (int k = 0; k < 200; k++) x = x * 1103515245u + 12345u;
    sink = x;
    __atomic_add_fetch(&A->hog_rounds, 1, __ATOMIC_RELEASE);
    leave();
    CHECK_EQ(pthread_mutex_unlock(&A->mu), 0);
  }
  if (i == HOG_MAX) __atomic_store_n(&A->hog_done, 1, __ATOMIC_RELEASE);
}

static void *hog(void *arg) {
  hog_loop();
  return arg;
}

static void contend(void) {
  while (__atomic_load_n(&A->hog_rounds, __ATOMIC_ACQUIRE) == 0) sched_yield(); /* the hog runs */
  for (int i = 0; i < ROUNDS; i++) {
    sched_yield();
    CHECK_EQ(pthread_mutex_lock(&A->mu), 0);
    enter();
    if (__atomic_load_n(&A->hog_done, __ATOMIC_ACQUIRE)) A->starved = 1;
    A->others++;
    leave();
    CHECK_EQ(pthread_mutex_unlock(&A->mu), 0);
  }
}

static void *contender(void *arg) {
  contend();
  return arg;
}

/* The robust kinds: a thread that ends holding the mutex. */
static void *die_holding(void *arg) {
  CHECK_EQ(pthread_mutex_lock(&A->mu), 0);
  return arg;
}

static void init_mutex(const char *kind) {
  pthread_mutexattr_t ma;
  CHECK_EQ(pthread_mutexattr_init(&ma), 0);
  if (strstr(kind, "robust")) CHECK_EQ(pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST), 0);
  if (strstr(kind, "pi")) CHECK_EQ(pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT), 0);
  if (strstr(kind, "pshared"))
    CHECK_EQ(pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED), 0);
  if (strcmp(kind, "pp") == 0) {
    CHECK_EQ(pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_PROTECT), 0);
    CHECK_EQ(pthread_mutexattr_setprioceiling(&ma, 2), 0);
  }
  CHECK_EQ(pthread_mutex_init(&A->mu, &ma), 0);
  pthread_mutexattr_destroy(&ma);
}

static void start(pthread_t *t, void *(*fn)(void *), int fifo) {
  pthread_attr_t a;
  CHECK_EQ(pthread_attr_init(&a), 0);
  if (fifo) {
    struct sched_param sp = {.sched_priority = 1};
    CHECK_EQ(pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED), 0);
    CHECK_EQ(pthread_attr_setschedpolicy(&a, SCHED_FIFO), 0);
    CHECK_EQ(pthread_attr_setschedparam(&a, &sp), 0);
  }
  CHECK_EQ(pthread_create(t, &a, fn, NULL), 0);
  pthread_attr_destroy(&a);
}

int main(void) {
  const char *kind = KIND;
  int fifo = strcmp(kind, "pp") == 0;
  if (fifo) {
    struct sched_param sp = {.sched_priority = 1};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) return 77; /* no real-time rights */
    sp.sched_priority = 0;
    CHECK_EQ(sched_setscheduler(0, SCHED_OTHER, &sp), 0);
  }
  A = mmap(NULL, sizeof *A, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(A != MAP_FAILED, "mmap");
  init_mutex(kind);

  pthread_t h, c;
  pid_t child = -1;
  if (strcmp(kind, "pshared_fork") == 0) {
    child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0) {
      hog_loop();
      _exit(0);
    }
  } else {
    start(&h, hog, fifo);
  }
  start(&c, contender, fifo);
  CHECK_EQ(pthread_join(c, NULL), 0);
  __atomic_store_n(&A->stop, 1, __ATOMIC_RELEASE);
  if (child > 0) {
    int st;
    CHECK_EQ(waitpid(child, &st, 0), child);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the hog process: status %#x", st);
  } else {
    CHECK_EQ(pthread_join(h, NULL), 0);
  }
  CHECK_EQ(A->others, ROUNDS);
  CHECK(!A->starved, "the contender got the mutex only after the hog's %ld rounds", HOG_MAX);
  CHECK(A->hog_rounds > 0, "the hog ran %ld rounds", A->hog_rounds);
  if (fifo) {
    /* Only a real-time thread may lock it (the ceiling is a SCHED_FIFO priority). */
    struct sched_param sp = {.sched_priority = 1};
    CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp), 0);
  }
  CHECK_EQ(pthread_mutex_trylock(&A->mu), 0); /* left unlocked, no owner */
  CHECK_EQ(pthread_mutex_unlock(&A->mu), 0);
  if (fifo) {
    struct sched_param sp = {.sched_priority = 0};
    CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp), 0);
  }
  if (strstr(kind, "robust")) {
    CHECK_EQ(pthread_create(&c, NULL, die_holding, NULL), 0);
    CHECK_EQ(pthread_join(c, NULL), 0);
    CHECK_EQ(pthread_mutex_lock(&A->mu), EOWNERDEAD);
    CHECK_EQ(pthread_mutex_consistent(&A->mu), 0);
    CHECK_EQ(pthread_mutex_unlock(&A->mu), 0);
    CHECK_EQ(pthread_mutex_trylock(&A->mu), 0);
    CHECK_EQ(pthread_mutex_unlock(&A->mu), 0);
  }
#ifdef MEASURE
  fprintf(stderr, "hog rounds %ld\n", A->hog_rounds);
#endif
  printf("%s: %d rounds beside the hog\n", kind, ROUNDS);
  return 0;
}
