/* sched_yield gives the CPU to another thread that waits for it: the
 * process is pinned to one CPU (then re-executed, so that every thread
 * created from then on, a preloaded runtime's own included, inherits the
 * mask), and main and a kernel thread started from a constructor (before
 * any preloaded runtime initializes: it stays a plain kernel thread) pass
 * a turn back and forth ROUNDS times, each spinning on sched_yield until
 * the turn is its own. Without a real yield, the waiting side runs only
 * when the kernel preempts the spinning one (a scheduler tick per turn):
 * the run does not end within the case's timeout. Exit 77 when the
 * process cannot be pinned. */
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "common.h"

#define ROUNDS 20000

static int turn; /* 1: the kernel thread's, 0: main's */
static long foreign_rounds;
static pthread_t foreign;
static int pinned;

static void *foreign_main(void *arg) {
  for (int i = 0; i < ROUNDS; i++) {
    while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != 1) sched_yield();
    foreign_rounds++;
    __atomic_store_n(&turn, 0, __ATOMIC_RELEASE);
  }
  return arg;
}

static int cpus_of_thread(void) {
  cpu_set_t s;
  CPU_ZERO(&s);
  if (syscall(SYS_sched_getaffinity, 0, sizeof s, &s) < 0) return -1;
  return CPU_COUNT(&s);
}

__attribute__((constructor)) static void early(void) {
  const char *p = getenv("YIELD_FOREIGN_PINNED");
  if (!p) return;
  pinned = atoi(p);
  CHECK_EQ(pthread_create(&foreign, NULL, foreign_main, NULL), 0);
}

int main(int argc, char **argv) {
  (void)argc;
  if (!pinned) {
    /* One CPU of the calling kernel thread's mask; exec keeps it. */
    int rc = pin_one_cpu_reexec("YIELD_FOREIGN_PINNED", argv, 0);
    if (rc) return rc;
  }
  CHECK_EQ(cpus_of_thread(), 1);
  for (int i = 0; i < ROUNDS; i++) {
    __atomic_store_n(&turn, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != 0) sched_yield();
  }
  CHECK_EQ(pthread_join(foreign, NULL), 0);
  CHECK_EQ(foreign_rounds, ROUNDS);
  printf("%d turns passed on one CPU with sched_yield\n", ROUNDS);
  return 0;
}
