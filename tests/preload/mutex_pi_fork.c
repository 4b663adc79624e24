/* A thread raised by priority inheritance reads back its own scheduling,
 * and a child it forks while raised does not inherit the raise.
 *
 * The owner L is a SCHED_OTHER thread started from a constructor (before a
 * preloaded runtime initializes: a plain kernel thread, never one of its
 * goroutines). It locks a PTHREAD_PRIO_INHERIT mutex; a SCHED_FIFO 30
 * waiter H blocks on it. While H waits, L:
 *   - reads its kernel priority (/proc/thread-self/stat field 18: -31 is
 *     real-time 30): raised, the precondition;
 *   - reads back sched_getscheduler(0), sched_getparam(0) and
 *     pthread_getschedparam(self): SCHED_OTHER, 0 (natively a PI boost
 *     changes neither the policy nor the priority a thread reads back);
 *   - forks: the child reads its scheduling and kernel priority, which
 *     are L's own (the kernel never passes a PI boost to a child).
 * L then unlocks; H gets the mutex; L reads back its own scheduling
 * again (pthread_getschedparam's answer is not one cached while raised).
 *
 * Exit 77 (SKIP) when SCHED_FIFO is not permitted. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "common.h"

static pthread_mutex_t mu;
static pthread_t owner_th;
static int stage; /* futex word: 1 L locks, 2 L checks, unlocks */
static int locked, h_tid, h_got;
static int fail_line; /* L's first failed check (0: none) */
static char fail_msg[200];

static int kernel_prio(void) {
  char buf[1024];
  FILE *f = fopen("/proc/thread-self/stat", "r");
  if (!f) return 1000;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  if (!p) return 1000;
  int field = 2;
  char *save = NULL;
  for (char *t = strtok_r(p + 1, " ", &save); t; t = strtok_r(NULL, " ", &save))
    if (++field == 18) return atoi(t);
  return 1000;
}

static void futex_wait_for(int *w, int want) {
  int v;
  while ((v = __atomic_load_n(w, __ATOMIC_ACQUIRE)) < want)
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void futex_set(int *w, int v) {
  __atomic_store_n(w, v, __ATOMIC_RELEASE);
  syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 8, NULL, NULL, 0);
}

#define LCHECK(cond, ...)                                            \
  do {                                                               \
    if (!(cond) && !fail_line) {                                     \
      fail_line = __LINE__;                                          \
      snprintf(fail_msg, sizeof fail_msg, __VA_ARGS__);              \
    }                                                                \
  } while (0)

/* 0 if the caller reads back SCHED_OTHER, priority 0 everywhere; else the
 * first mismatch, in msg. */
static int own_readback(char *msg, size_t len) {
  int pol = sched_getscheduler(0);
  struct sched_param sp = {.sched_priority = -1};
  int r = sched_getparam(0, &sp);
  int ppol = -1;
  struct sched_param psp = {.sched_priority = -1};
  int pr = pthread_getschedparam(pthread_self(), &ppol, &psp);
  if (pol != SCHED_OTHER || r != 0 || sp.sched_priority != 0 || pr != 0 ||
      ppol != SCHED_OTHER || psp.sched_priority != 0) {
    snprintf(msg, len,
             "sched_getscheduler %d, sched_getparam %d/%d, pthread_getschedparam %d: %d/%d "
             "(want 0, 0/0, 0: 0/0)",
             pol, r, sp.sched_priority, pr, ppol, psp.sched_priority);
    return 1;
  }
  return 0;
}

static void *owner(void *arg) {
  (void)arg;
  futex_wait_for(&stage, 1);
  int prio_own = kernel_prio();
  CHECK_EQ(pthread_mutex_lock(&mu), 0);
  futex_set(&locked, 1);
  futex_wait_for(&stage, 2);
  if (stage == 2) { /* 3: SKIP, nobody waits */
    int prio = kernel_prio();
    LCHECK(prio == -31, "owner not raised while H waits: kernel priority %d (own %d)", prio,
           prio_own);
    char msg[160];
    if (own_readback(msg, sizeof msg)) LCHECK(0, "raised owner reads back %s", msg);
    pid_t pid = fork();
    if (pid == 0) {
      int cp = kernel_prio();
      if (cp != prio_own) {
        fprintf(stderr, "FAIL: the child of the raised owner has kernel priority %d, not %d\n",
                cp, prio_own);
        _exit(2);
      }
      if (own_readback(msg, sizeof msg)) {
        fprintf(stderr, "FAIL: the child of the raised owner reads back %s\n", msg);
        _exit(3);
      }
      _exit(0);
    }
    LCHECK(pid > 0, "fork: %s", strerror(errno));
    if (pid > 0) {
      int st = 0;
      LCHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
      LCHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status 0x%x", st);
    }
  }
  CHECK_EQ(pthread_mutex_unlock(&mu), 0);
  futex_wait_for(&h_got, 1);
  char msg[160];
  if (own_readback(msg, sizeof msg)) LCHECK(0, "after unlocking, the owner reads back %s", msg);
  int prio = kernel_prio();
  LCHECK(prio >= 0, "after unlocking, the owner's kernel priority is %d", prio);
  return NULL;
}

static void *waiter(void *arg) {
  (void)arg;
  __atomic_store_n(&h_tid, self_tid(), __ATOMIC_RELEASE);
  CHECK_EQ(pthread_mutex_lock(&mu), 0);
  CHECK_EQ(pthread_mutex_unlock(&mu), 0);
  futex_set(&h_got, 1);
  return NULL;
}

__attribute__((constructor)) static void early(void) {
  pthread_mutexattr_t at;
  CHECK_EQ(pthread_mutexattr_init(&at), 0);
  CHECK_EQ(pthread_mutexattr_setprotocol(&at, PTHREAD_PRIO_INHERIT), 0);
  CHECK_EQ(pthread_mutex_init(&mu, &at), 0);
  CHECK_EQ(pthread_create(&owner_th, NULL, owner, NULL), 0);
}

int main(void) {
  struct rlimit rl = {5000000, 6000000};
  setrlimit(RLIMIT_RTTIME, &rl);
  futex_set(&stage, 1);
  futex_wait_for(&locked, 1);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
  pthread_attr_setschedpolicy(&at, SCHED_FIFO);
  struct sched_param sp = {.sched_priority = 30};
  pthread_attr_setschedparam(&at, &sp);
  pthread_t h;
  int err = pthread_create(&h, &at, waiter, NULL);
  pthread_attr_destroy(&at);
  if (err) {
    fprintf(stderr, "SKIP: SCHED_FIFO not permitted here (%s)\n", strerror(err));
    futex_set(&h_got, 1);
    futex_set(&stage, 3);
    pthread_join(owner_th, NULL);
    return 77;
  }
  while (!__atomic_load_n(&h_tid, __ATOMIC_ACQUIRE)) sched_yield();
  wait_tid_asleep(h_tid, &h_got);
  futex_set(&stage, 2);
  CHECK_EQ(pthread_join(owner_th, NULL), 0);
  CHECK_EQ(pthread_join(h, NULL), 0);
  CHECK(!fail_line, "line %d: %s", fail_line, fail_msg);
  printf("ok\n");
  return 0;
}
