/* A thread's own scheduling policy set with the sched_setattr system call
 * (syscall(): glibc 2.36 has no wrapper) reads back with
 * sched_getscheduler, sched_getparam and sched_getattr, mixed with
 * sched_setscheduler, as stress-ng's schedpolicy stressor does (under
 * goshim it read back SCHED_BATCH after setting SCHED_DEADLINE, then 0
 * after SCHED_IDLE). Meanwhile other threads read their own policy from
 * the kernel: still SCHED_OTHER (a policy set for one thread never leaks
 * to another). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif

struct attr {
  uint32_t size, sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime, sched_deadline, sched_period;
};

static long setattr(int policy, int prio, unsigned flags) {
  struct attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.sched_policy = policy;
  a.sched_priority = prio;
  if (policy == SCHED_DEADLINE) {
    a.sched_runtime = 10 * 1000 * 1000;
    a.sched_deadline = 30 * 1000 * 1000;
    a.sched_period = 30 * 1000 * 1000;
  }
  return syscall(SYS_sched_setattr, 0, &a, flags);
}

static int kernel_policy(void) {
  struct attr a;
  memset(&a, 0, sizeof a);
  CHECK_EQ(syscall(SYS_sched_getattr, 0, &a, sizeof a, 0), 0);
  return (int)a.sched_policy;
}

static void expect(const char *after, int policy, int prio) {
  CHECK(sched_getscheduler(0) == policy, "after %s: sched_getscheduler %d, %d expected", after,
        sched_getscheduler(0), policy);
  struct sched_param sp;
  CHECK_EQ(sched_getparam(0, &sp), 0);
  CHECK(sp.sched_priority == prio, "after %s: priority %d, %d expected", after, sp.sched_priority, prio);
  CHECK(kernel_policy() == policy, "after %s: sched_getattr %d, %d expected", after, kernel_policy(),
        policy);
  printf("%s: policy %d priority %d\n", after, policy, prio);
}

static atomic_int stop, others_bad;

static void *other(void *arg) {
  while (!atomic_load(&stop)) {
    if (kernel_policy() != SCHED_OTHER || sched_getscheduler(0) != SCHED_OTHER)
      atomic_fetch_add(&others_bad, 1);
    sched_yield();
  }
  return arg;
}

static void *changer(void *arg) {
  struct sched_param sp = {0};
  expect("start", SCHED_OTHER, 0);
  CHECK_EQ(sched_setscheduler(0, SCHED_BATCH, &sp), 0);
  expect("sched_setscheduler SCHED_BATCH", SCHED_BATCH, 0);
  CHECK_EQ(setattr(SCHED_IDLE, 0, 0), 0);
  expect("sched_setattr SCHED_IDLE", SCHED_IDLE, 0);
  errno = 0;
  CHECK(setattr(SCHED_BATCH, 0, ~0u) == -1 && errno == EINVAL, "flags ~0: errno %d", errno);
  CHECK(setattr(SCHED_BATCH, 5, 0) == -1 && errno == EINVAL, "priority 5 for SCHED_BATCH: errno %d", errno);
  expect("refused calls", SCHED_IDLE, 0);
  CHECK_EQ(setattr(SCHED_FIFO, 10, 0), 0);
  expect("sched_setattr SCHED_FIFO 10", SCHED_FIFO, 10);
  CHECK_EQ(setattr(SCHED_OTHER, 0, 0), 0);
  expect("sched_setattr SCHED_OTHER", SCHED_OTHER, 0);
  CHECK_EQ(setattr(SCHED_DEADLINE, 0, 0), 0);
  expect("sched_setattr SCHED_DEADLINE", SCHED_DEADLINE, 0);
  CHECK_EQ(sched_setscheduler(0, SCHED_IDLE, &sp), 0);
  expect("sched_setscheduler SCHED_IDLE", SCHED_IDLE, 0);
  CHECK_EQ(sched_setscheduler(0, SCHED_BATCH, &sp), 0);
  expect("sched_setscheduler SCHED_BATCH", SCHED_BATCH, 0);
  CHECK_EQ(setattr(SCHED_DEADLINE, 0, 0), 0);
  expect("sched_setattr SCHED_DEADLINE again", SCHED_DEADLINE, 0);
  CHECK_EQ(sched_setscheduler(0, SCHED_OTHER, &sp), 0);
  expect("sched_setscheduler SCHED_OTHER", SCHED_OTHER, 0);
  return arg;
}

int main(void) {
  if (geteuid() != 0) {
    fprintf(stderr, "SKIP: needs root (real-time and deadline policies)\n");
    return 77;
  }
  /* Can the kernel give this process SCHED_DEADLINE at all (a container,
     a cgroup without real-time bandwidth)? Asked from a plain thread. */
  long probe = -1;
  int probe_errno = 0;
  {
    pid_t child = fork();
    if (child == 0) _exit(setattr(SCHED_DEADLINE, 0, 0) == 0 ? 0 : errno);
    int st;
    CHECK_EQ(waitpid(child, &st, 0), child);
    probe = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
    probe_errno = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  if (probe != 0) {
    fprintf(stderr, "SKIP: SCHED_DEADLINE refused here (errno %d)\n", probe_errno);
    return 77;
  }
  pthread_t o[3], c;
  for (int i = 0; i < 3; i++) CHECK_EQ(pthread_create(&o[i], NULL, other, NULL), 0);
  CHECK_EQ(pthread_create(&c, NULL, changer, NULL), 0);
  CHECK_EQ(pthread_join(c, NULL), 0);
  atomic_store(&stop, 1);
  for (int i = 0; i < 3; i++) CHECK_EQ(pthread_join(o[i], NULL), 0);
  CHECK(atomic_load(&others_bad) == 0, "%d looks of other threads saw another policy",
        atomic_load(&others_bad));
  printf("the other threads kept SCHED_OTHER\n");
  return 0;
}
