/* Many threads contend for the allocator's locks on an overloaded machine,
 * and the process needs no more kernel threads for that.
 *
 * ROUNDS (40) rounds of 256 new threads: each allocates ITERS (16) blocks,
 * small ones and ones too large for a per-thread cache (64 KiB to 1 MiB),
 * hands every fourth to its neighbour, which frees it (a remote free), and
 * exits; a thread's start and end take the allocator's global locks. Child
 * processes keep every CPU busy meanwhile (2 per CPU), so a thread holding
 * an allocator lock often waits for a CPU while others want that lock.
 * The round's threads meet at a barrier and stay alive while the kernel
 * threads are counted (common.h: MAX_KERNEL_THREADS under an M:N runtime).
 * Every block's contents are checked when it is freed.
 *
 * Under goshim before the fix an M asleep on such a lock had its P moved
 * to a spare M at sysmon's next look, and that M blocked on the same lock
 * in turn: up to 22 kernel threads (at most 6 expected at 2 processors).
 * Natively this is ordinary pthread code; the output is fixed. */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "common.h"

enum { kThreads = 256, kSlots = 8 };
static int rounds;

static pthread_barrier_t start_bar, done_bar, check_bar;
static int iters;

/* One mailbox per thread: a block its left neighbour passes to it. */
struct mailbox {
  pthread_mutex_t mu;
  unsigned char *blk[kSlots];
  size_t len[kSlots];
  int n;
} box[kThreads];

static size_t size_for(unsigned x) { return (64u << 10) + (x % 15u) * (64u << 10); }

static void fill(unsigned char *p, size_t n, unsigned char v) {
  /* Touch one byte per page and both ends: the pages fault in. */
  for (size_t i = 0; i < n; i += 4096) p[i] = v;
  p[n - 1] = v;
}

static int verify(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i += 4096)
    if (p[i] != v) return 0;
  return p[n - 1] == v;
}

static void drain(int me) {
  struct mailbox *b = &box[me];
  pthread_mutex_lock(&b->mu);
  for (int i = 0; i < b->n; i++) {
    CHECK(verify(b->blk[i], b->len[i], (unsigned char)b->len[i] ^ 0x5a), "a passed block changed");
    free(b->blk[i]);
  }
  b->n = 0;
  pthread_mutex_unlock(&b->mu);
}

static void *worker(void *arg) {
  int me = (int)(intptr_t)arg;
  int next = (me + 1) % kThreads;
  unsigned x = (unsigned)me * 2654435761u;
  {
    pthread_barrier_wait(&start_bar);
    for (int i = 0; i < iters; i++) {
      x = x * 1103515245u + 12345u;
      size_t n = (i & 1) ? size_for(x >> 8) : 16 + (x >> 8) % 4096;
      unsigned char *p = malloc(n);
      CHECK(p != NULL, "malloc(%zu) failed", n);
      unsigned char v = (unsigned char)n ^ 0x5a;
      fill(p, n, v);
      if (i % 4 == 0) {
        struct mailbox *b = &box[next];
        pthread_mutex_lock(&b->mu);
        if (b->n < kSlots) {
          b->blk[b->n] = p;
          b->len[b->n] = n;
          b->n++;
          p = NULL;
        }
        pthread_mutex_unlock(&b->mu);
      }
      if (p) {
        CHECK(verify(p, n, v), "a block changed");
        free(p);
      }
      if (i % 8 == 0) drain(me);
    }
    pthread_barrier_wait(&done_bar);  /* every thread alive: the count */
    drain(me);
    pthread_barrier_wait(&check_bar);
  }
  return NULL;
}

int main(void) {
  iters = env_int("ITERS", 16);
  rounds = env_int("ROUNDS", 40);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  /* Busy children: more runnable threads than CPUs for the whole run. */
  int nhog = (int)(2 * ncpu);
  pid_t hogs[64];
  pid_t parent = getpid();
  if (nhog > 64) nhog = 64;
  for (int i = 0; i < nhog; i++) {
    hogs[i] = fork();
    CHECK(hogs[i] >= 0, "fork: %s", strerror(errno));
    if (hogs[i] == 0) {
      /* Ends with the test, however the test ends (a timeout's SIGKILL). */
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
      volatile unsigned long spin = 0;
      for (;;) spin++;
    }
  }
  pthread_barrier_init(&start_bar, NULL, kThreads + 1);
  pthread_barrier_init(&done_bar, NULL, kThreads + 1);
  pthread_barrier_init(&check_bar, NULL, kThreads + 1);
  for (int i = 0; i < kThreads; i++) pthread_mutex_init(&box[i].mu, NULL);
  pthread_t t[kThreads];
  for (int round = 0; round < rounds; round++) {
    for (int i = 0; i < kThreads; i++)
      CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i), 0);
    pthread_barrier_wait(&start_bar);
    pthread_barrier_wait(&done_bar);
    check_kernel_threads("allocating threads alive");
    pthread_barrier_wait(&check_bar);
    for (int i = 0; i < kThreads; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  }
  for (int i = 0; i < kThreads; i++) drain(i);
  for (int i = 0; i < nhog; i++) {
    CHECK_EQ(kill(hogs[i], SIGKILL), 0);
    int st;
    CHECK_EQ(waitpid(hogs[i], &st, 0), hogs[i]);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "a busy child ended otherwise");
  }
  printf("%d rounds of %d new threads, %d allocations each: every block intact\n", rounds, kThreads,
         iters);
  return 0;
}
