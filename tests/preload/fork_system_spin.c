/* Thread creation from inside the allocator's reach, under load.
 *
 * Part 1: four threads each fork 20 times (the child starts 16 threads,
 * joins them and exits) and call system("true"), while four other threads
 * spin. Every fork, system and child thread start allocates (stacks, TLS,
 * the shell's environment copy) while the spinners keep the processors
 * busy, so kernel threads are started while other threads are inside
 * malloc.
 *
 * Part 2: 1,000 threads on the smallest stacks (16 KiB) wait on a
 * process-shared condition variable until all of them are waiting, then
 * one broadcast releases them.
 *
 * Optional argument: the number of rounds of both parts (default 1). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

enum { NFORKERS = 4, NSPIN = 4, NFORKS = 20, NCHILD = 16, NWAITERS = 1000 };

static atomic_int stop_spin, spinning;
static atomic_ulong spins;

static void *spinner(void *arg) {
  atomic_fetch_add(&spinning, 1);
  while (!atomic_load_explicit(&stop_spin, memory_order_relaxed))
    atomic_fetch_add_explicit(&spins, 1, memory_order_relaxed);
  return arg;
}

static void *child_thread(void *arg) {
  /* Allocates, like any thread start does, and a bit more. */
  char *p = malloc(64 + (size_t)(long)arg * 32);
  if (!p) return NULL;
  memset(p, 1, 64);
  free(p);
  return (void *)((long)arg + 1);
}

static int child_main(void) {
  pthread_t t[NCHILD];
  for (long i = 0; i < NCHILD; i++)
    if (pthread_create(&t[i], NULL, child_thread, (void *)i) != 0) return 2;
  for (long i = 0; i < NCHILD; i++) {
    void *r;
    if (pthread_join(t[i], &r) != 0) return 3;
    if ((long)r != i + 1) return 4;
  }
  return 0;
}

static void *forker(void *arg) {
  long id = (long)arg;
  for (int i = 0; i < NFORKS; i++) {
    pid_t pid = fork();
    CHECK(pid >= 0, "forker %ld: fork: %s", id, strerror(errno));
    if (pid == 0) _exit(child_main());
    int st = 0;
    pid_t w;
    while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
    }
    CHECK(w == pid, "forker %ld: waitpid: %s", id, strerror(errno));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "forker %ld: child status %#x", id, st);
    int rc = system("true");
    CHECK(rc == 0, "forker %ld: system(\"true\") = %#x", id, rc);
  }
  return NULL;
}

static void fork_round(void) {
  pthread_t s[NSPIN], f[NFORKERS];
  atomic_store(&stop_spin, 0);
  atomic_store(&spinning, 0);
  for (long i = 0; i < NSPIN; i++) CHECK_EQ(pthread_create(&s[i], NULL, spinner, (void *)i), 0);
  while (atomic_load(&spinning) < NSPIN) sched_yield(); /* all of them spin */
  for (long i = 0; i < NFORKERS; i++) CHECK_EQ(pthread_create(&f[i], NULL, forker, (void *)i), 0);
  for (int i = 0; i < NFORKERS; i++) CHECK_EQ(pthread_join(f[i], NULL), 0);
  atomic_store(&stop_spin, 1);
  for (int i = 0; i < NSPIN; i++) CHECK_EQ(pthread_join(s[i], NULL), 0);
}

/* Process-shared state in a shared mapping, as a program sharing it with
 * children would have it. */
struct shared {
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* waiters wait here for go */
  pthread_cond_t all_in;  /* main waits here for every waiter */
  int waiting, go, done;
};
static struct shared *sh;

static void *waiter(void *arg) {
  CHECK_EQ(pthread_mutex_lock(&sh->mu), 0);
  if (++sh->waiting == NWAITERS) CHECK_EQ(pthread_cond_signal(&sh->all_in), 0);
  while (!sh->go) CHECK_EQ(pthread_cond_wait(&sh->cv, &sh->mu), 0);
  sh->done++;
  CHECK_EQ(pthread_mutex_unlock(&sh->mu), 0);
  return arg;
}

static void pshared_round(void) {
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(sh != MAP_FAILED, "mmap: %s", strerror(errno));
  pthread_mutexattr_t ma;
  pthread_condattr_t ca;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  pthread_condattr_init(&ca);
  pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
  CHECK_EQ(pthread_mutex_init(&sh->mu, &ma), 0);
  CHECK_EQ(pthread_cond_init(&sh->cv, &ca), 0);
  CHECK_EQ(pthread_cond_init(&sh->all_in, &ca), 0);

  pthread_attr_t a;
  pthread_attr_init(&a);
  CHECK_EQ(pthread_attr_setstacksize(&a, 16384), 0);
  static pthread_t t[NWAITERS];
  for (long i = 0; i < NWAITERS; i++) {
    int rc = pthread_create(&t[i], &a, waiter, (void *)i);
    CHECK(rc == 0, "pthread_create %ld: %s", i, strerror(rc));
  }
  CHECK_EQ(pthread_mutex_lock(&sh->mu), 0);
  while (sh->waiting < NWAITERS) CHECK_EQ(pthread_cond_wait(&sh->all_in, &sh->mu), 0);
  sh->go = 1;
  CHECK_EQ(pthread_cond_broadcast(&sh->cv), 0);
  CHECK_EQ(pthread_mutex_unlock(&sh->mu), 0);
  for (long i = 0; i < NWAITERS; i++) {
    void *r;
    CHECK_EQ(pthread_join(t[i], &r), 0);
    CHECK_EQ((long)r, i);
  }
  CHECK_EQ(sh->done, NWAITERS);
  pthread_attr_destroy(&a);
  pthread_cond_destroy(&sh->cv);
  pthread_cond_destroy(&sh->all_in);
  pthread_mutex_destroy(&sh->mu);
  munmap(sh, sizeof *sh);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1;
  for (int r = 0; r < rounds; r++) {
    fork_round();
    pshared_round();
  }
  printf("fork_system_spin: %d round(s) of %d forks + system, %d pshared waiters: ok\n", rounds,
         NFORKERS * NFORKS, NWAITERS);
  return 0;
}
