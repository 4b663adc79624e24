/* A program whose executable defines its own allocator (malloc, calloc,
 * realloc, free, ...) around one non-recursive lock, as a statically
 * linked jemalloc does (rustc), and whose allocator, while it holds that
 * lock, makes calls that may block or wake another thread: it appends to
 * a log file under flock (jemalloc reads /proc files under its init lock)
 * and signals a background "purger" thread through a condition variable
 * (jemalloc's background threads are woken so). glibc allocates through
 * the executable's allocator too (pthread_create callocs the new thread's
 * DTV), so nothing may call into the allocator from inside such a call:
 * the allocator would be entered again on the same thread with its lock
 * held. The allocator detects that (a per-thread depth) and aborts with a
 * message; a plain self-deadlock on the lock would hang instead.
 *
 * Each round, two threads are started that spin until the round's
 * allocation is done: one runs, the other waits for a CPU when there are
 * fewer CPUs than threads, so that a runtime multiplexing threads over a
 * few kernel threads needs a new kernel thread right when the allocator
 * blocks in flock. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

/* ---- the allocator: a bump arena under one lock -------------------------- */
#define ARENA (1UL << 32)

struct hdr {
  uint64_t size;
  uint64_t pad;
};

static pthread_mutex_t heap = PTHREAD_MUTEX_INITIALIZER; /* not recursive */
static char *arena;
static uintptr_t next_off;
static __thread int depth; /* this thread is inside the allocator */

/* The background thread's wake-up, done under the heap lock. */
static pthread_mutex_t bg_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_cv = PTHREAD_COND_INITIALIZER;
static int bg_pending;
static volatile int notify_next; /* the next allocation logs and wakes the purger */
static int logfd = -1;

static void die(const char *msg) {
  ssize_t r = write(2, msg, strlen(msg));
  (void)r;
  abort();
}

static void *alloc_aligned(size_t align, size_t size) {
  if (align < 16) align = 16;
  if (size > ARENA / 4) {
    errno = ENOMEM;
    return NULL;
  }
  if (depth) die("own_malloc_reentry: the allocator was entered again from inside itself\n");
  depth = 1;
  if (pthread_mutex_lock(&heap) != 0) die("own_malloc_reentry: heap lock failed\n");
  if (!arena) {
    char *m = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) die("own_malloc_reentry: mmap failed\n");
    arena = m;
  }
  size_t need = sizeof(struct hdr) + align + ((size + 15) & ~(size_t)15);
  if (next_off + need > ARENA) die("own_malloc_reentry: arena exhausted\n");
  uintptr_t p = (uintptr_t)arena + next_off + sizeof(struct hdr);
  next_off += need;
  p = (p + align - 1) & ~(uintptr_t)(align - 1);
  ((struct hdr *)p - 1)->size = size;
  if (notify_next) {
    notify_next = 0;
    if (flock(logfd, LOCK_EX) != 0) die("own_malloc_reentry: flock failed\n");
    static const char line[] = "allocation\n";
    if (write(logfd, line, sizeof line - 1) != sizeof line - 1) die("own_malloc_reentry: log write\n");
    if (flock(logfd, LOCK_UN) != 0) die("own_malloc_reentry: unlock failed\n");
    pthread_mutex_lock(&bg_mtx);
    bg_pending++;
    pthread_cond_signal(&bg_cv);
    pthread_mutex_unlock(&bg_mtx);
  }
  pthread_mutex_unlock(&heap);
  depth = 0;
  return (void *)p;
}

void *malloc(size_t n) { return alloc_aligned(16, n); }
void free(void *p) { (void)p; }
void *calloc(size_t a, size_t b) {
  size_t n;
  if (__builtin_mul_overflow(a, b, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  return alloc_aligned(16, n); /* fresh arena memory is zero */
}
void *realloc(void *p, size_t n) {
  void *q = malloc(n);
  if (!q || !p) return q;
  size_t old = ((struct hdr *)p - 1)->size;
  memcpy(q, p, old < n ? old : n);
  return q;
}
void *memalign(size_t align, size_t n) { return alloc_aligned(align, n); }
void *aligned_alloc(size_t align, size_t n) { return alloc_aligned(align, n); }
int posix_memalign(void **out, size_t align, size_t n) {
  void *p = alloc_aligned(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void *valloc(size_t n) { return alloc_aligned((size_t)getpagesize(), n); }
void *pvalloc(size_t n) {
  size_t pg = (size_t)getpagesize();
  return alloc_aligned(pg, (n + pg - 1) & ~(pg - 1));
}
size_t malloc_usable_size(void *p) { return p ? ((struct hdr *)p - 1)->size : 0; }

/* ---- the program ------------------------------------------------------- */
#define ROUNDS 4

static pthread_mutex_t served_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t served_cv = PTHREAD_COND_INITIALIZER;
static int served;
static int stop;

static void *purger(void *arg) {
  (void)arg;
  pthread_mutex_lock(&bg_mtx);
  for (;;) {
    while (!bg_pending && !stop) pthread_cond_wait(&bg_cv, &bg_mtx);
    if (!bg_pending) break;
    bg_pending--;
    pthread_mutex_lock(&served_mtx);
    served++;
    pthread_cond_broadcast(&served_cv);
    pthread_mutex_unlock(&served_mtx);
  }
  pthread_mutex_unlock(&bg_mtx);
  return NULL;
}

static int released; /* the round's allocation is done */
static int spins[2];

static void *spinner(void *arg) {
  int id = (int)(long)arg;
  while (!__atomic_load_n(&released, __ATOMIC_ACQUIRE)) spins[id] = 1;
  return NULL;
}

int main(void) {
  char tmp[64];
  snprintf(tmp, sizeof tmp, "/tmp/own_malloc_reentry.%d", (int)getpid());
  logfd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  CHECK(logfd >= 0, "create %s", tmp);
  CHECK_EQ(unlink(tmp), 0);

  pthread_t pt;
  CHECK_EQ(pthread_create(&pt, NULL, purger, NULL), 0);
  for (int r = 0; r < ROUNDS; r++) {
    __atomic_store_n(&released, 0, __ATOMIC_RELEASE);
    pthread_t st[2];
    for (int i = 0; i < 2; i++) CHECK_EQ(pthread_create(&st[i], NULL, spinner, (void *)(long)i), 0);
    notify_next = 1;
    char *p = malloc(100); /* logs under flock and wakes the purger, under the heap lock */
    CHECK(p != NULL, "malloc");
    memset(p, 1, 100);
    __atomic_store_n(&released, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++) CHECK_EQ(pthread_join(st[i], NULL), 0);
    pthread_mutex_lock(&served_mtx);
    while (served < r + 1) pthread_cond_wait(&served_cv, &served_mtx);
    pthread_mutex_unlock(&served_mtx);
    free(p);
  }
  pthread_mutex_lock(&bg_mtx);
  stop = 1;
  pthread_cond_signal(&bg_cv);
  pthread_mutex_unlock(&bg_mtx);
  CHECK_EQ(pthread_join(pt, NULL), 0);
  CHECK_EQ(lseek(logfd, 0, SEEK_END), ROUNDS * 11);
  close(logfd);
  printf("%d allocations that logged under flock and woke a background thread from inside "
         "the program's own allocator\n", served);
  return 0;
}
