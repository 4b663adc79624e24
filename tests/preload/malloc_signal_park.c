/* Signal handlers that block while the thread they interrupted is inside
 * malloc or free.
 *
 * read() and write() are async-signal-safe: a handler may block in one,
 * whatever the interrupted code was doing, and the other threads must
 * keep allocating meanwhile. Four threads allocate, fill, check and free
 * blocks of assorted sizes in a loop; the main thread sends SIGUSR1 to
 * one of them 400 times, and each time the handler tells main it is in
 * (a write) and blocks reading a pipe until main releases it, while the
 * other three go on. Every block's contents are checked before it is
 * freed.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define NWORKERS 4
#define ROUNDS 400
#define LIVE 32

static int entered[2], release_[2];
static volatile int stop;
static long iters[NWORKERS];
static int bad;

static void on_usr1(int sig) {
  (void)sig;
  int saved = errno;
  char c = 1;
  while (write(entered[1], &c, 1) < 0 && errno == EINTR) {}
  while (read(release_[0], &c, 1) < 0 && errno == EINTR) {}
  errno = saved;
}

static void *worker(void *arg) {
  int id = (int)(long)arg;
  unsigned char *p[LIVE] = {0};
  size_t sz[LIVE] = {0};
  unsigned x = 2654435761u * (unsigned)(id + 1);
  long n = 0;
  while (!stop) {
    int k = (int)(n % LIVE);
    if (p[k]) {
      for (size_t i = 0; i < sz[k]; i += 61)
        if (p[k][i] != (unsigned char)(id * 31 + k)) { __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED); break; }
      free(p[k]);
    }
    x = x * 1103515245u + 12345u;
    sz[k] = 16 + (x >> 16) % 6000;
    p[k] = malloc(sz[k]);
    if (!p[k]) { __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED); sz[k] = 0; continue; }
    memset(p[k], id * 31 + k, sz[k]);
    n++;
    if (n % 256 == 0) sched_yield();  /* signals reach it soon, with any scheduler */
  }
  for (int k = 0; k < LIVE; k++) free(p[k]);
  iters[id] = n;
  return NULL;
}

int main(void) {
  CHECK(pipe(entered) == 0 && pipe(release_) == 0, "pipe");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
  pthread_t t[NWORKERS];
  for (int i = 0; i < NWORKERS; i++) CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(long)i), 0);
  /* Before the first signal: every handler blocks its thread in read(),
   * and threads that want an allocator lock the blocked one holds wait
   * for it in the kernel, as natively; the kernel threads that serve
   * them meanwhile are not this check's business. */
  check_kernel_threads("while the workers allocate");
  unsigned r = 12345;
  for (int round = 0; round < ROUNDS; round++) {
    r = r * 1103515245u + 12345u;
    CHECK_EQ(pthread_kill(t[(r >> 16) % NWORKERS], SIGUSR1), 0);
    char c;
    CHECK(read(entered[0], &c, 1) == 1, "read entered");
    CHECK(write(release_[1], &c, 1) == 1, "write release");
  }
  stop = 1;
  for (int i = 0; i < NWORKERS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  for (int i = 0; i < NWORKERS; i++) {
    CHECK(iters[i] > 0, "worker %d never allocated", i);
  }
  CHECK(bad == 0, "%d blocks lost their contents or failed", bad);
  printf("%d handlers blocked while %d threads allocated; every block intact\n", ROUNDS, NWORKERS);
  return 0;
}
