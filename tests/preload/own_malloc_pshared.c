/* A program whose executable defines its own allocator around one
 * non-recursive lock (as own_malloc_reentry), which registers fork
 * handlers as real allocators do (prepare takes the allocator lock, parent
 * and child release it), and whose allocator, holding its lock, may wait
 * on a process-shared semaphore (an allocator coordinating with other
 * processes over shared memory). glibc allocates through the executable's
 * allocator (pthread_create callocs the new thread's DTV), so no thread
 * may be created inside such a wait, nor in a fork child before the
 * program's own child handler released the lock: the allocator would be
 * entered again with its lock held. It detects that (a per-thread depth)
 * and aborts with a message.
 *
 * 1. fork: the child (whose allocator lock is held until the program's
 *    child handler runs) starts a thread and ends; the parent checks its
 *    exit status.
 * 2. The first process-shared wait of a process, inside the allocator: a
 *    fork child's allocation waits on semaphore s2 until the parent posts
 *    it; then the parent's allocation waits on s1 until the child posts
 *    it. Each posts once it sees the other waiting on the semaphore
 *    (glibc's count of waiters in it).
 *
 * 3. Then ROUNDS more waits on s1, each posted by a child after a byte on
 *    a pipe.
 *
 * (In a fork child, glibc reuses the parent's thread stacks, with their
 * DTVs, for the first threads it creates, so step 1 allocates nothing
 * unless no cached stack fits.) */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
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
static sem_t *wait_next;   /* the next allocation waits on it (under the lock) */

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
  if (depth) die("own_malloc_pshared: the allocator was entered again from inside itself\n");
  depth = 1;
  if (pthread_mutex_lock(&heap) != 0) die("own_malloc_pshared: heap lock failed\n");
  if (!arena) {
    char *m = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) die("own_malloc_pshared: mmap failed\n");
    arena = m;
  }
  size_t need = sizeof(struct hdr) + align + ((size + 15) & ~(size_t)15);
  if (next_off + need > ARENA) die("own_malloc_pshared: arena exhausted\n");
  uintptr_t p = (uintptr_t)arena + next_off + sizeof(struct hdr);
  next_off += need;
  p = (p + align - 1) & ~(uintptr_t)(align - 1);
  ((struct hdr *)p - 1)->size = size;
  sem_t *s = wait_next;
  if (s) {
    wait_next = NULL;
    while (sem_wait(s) != 0)
      if (errno != EINTR) die("own_malloc_pshared: sem_wait failed\n");
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

/* The allocator's fork handlers: nothing may allocate between prepare and
 * the child's release (the lock is held, as by a real allocator). */
static void fork_prepare(void) {
  if (depth) die("own_malloc_pshared: fork from inside the allocator\n");
  depth = 1;
  if (pthread_mutex_lock(&heap) != 0) die("own_malloc_pshared: heap lock failed\n");
}
static void fork_parent(void) {
  pthread_mutex_unlock(&heap);
  depth = 0;
}
static void fork_child(void) {
  pthread_mutex_unlock(&heap);
  depth = 0;
}

/* ---- the program ------------------------------------------------------- */

struct shm {
  sem_t s1, s2;
};
static struct shm *S;

/* Whether process pid has ended (a zombie, or reaped). */
static int ended(pid_t pid) {
  char path[64], stat[4096];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 1;
  size_t n = fread(stat, 1, sizeof stat - 1, f);
  fclose(f);
  stat[n] = 0;
  char *rp = strrchr(stat, ')');
  return !rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X';
}

/* The waiters glibc counts on a semaphore: on 64-bit targets sem_t holds
 * a 64-bit word, the value in its low half and the number of waiters in
 * its high half (struct new_sem). */
static unsigned sem_waiters(sem_t *s) {
  return (unsigned)(__atomic_load_n((uint64_t *)s, __ATOMIC_ACQUIRE) >> 32);
}
_Static_assert(sizeof(void *) == 8, "64-bit sem_t layout");

/* Posts s once another process waits on it; 0, or -1 if pid is gone. */
static int post_when_blocked(pid_t pid, sem_t *s) {
  while (sem_waiters(s) == 0) {
    if (ended(pid)) return -1;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL); /* polling interval only */
  }
  return sem_post(s);
}

static void *noop(void *arg) { return arg; }

#define ROUNDS 200

int main(void) {
  CHECK_EQ(pthread_atfork(fork_prepare, fork_parent, fork_child), 0);
  S = mmap(NULL, sizeof *S, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(S != MAP_FAILED, "mmap");
  CHECK_EQ(sem_init(&S->s1, 1, 0), 0);
  CHECK_EQ(sem_init(&S->s2, 1, 0), 0);
  fflush(stdout);

  /* 1. A fork child starts a thread. */
  pid_t a = fork();
  CHECK(a >= 0, "fork");
  if (a == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, noop, NULL) != 0) _exit(3);
    if (pthread_join(t, NULL) != 0) _exit(4);
    _exit(0);
  }
  int st;
  CHECK_EQ(waitpid(a, &st, 0), a);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the fork child: status %#x", st);
  printf("a fork child started a thread\n");

  /* 2. First process-shared waits inside the allocator: the child's, then
   * the parent's. */
  pid_t parent = getpid();
  fflush(stdout);
  pid_t b = fork();
  CHECK(b >= 0, "fork");
  if (b == 0) {
    wait_next = &S->s2;
    char *p = malloc(64); /* waits on s2 inside the allocator */
    if (!p) _exit(6);
    memset(p, 2, 64);
    if (post_when_blocked(parent, &S->s1) != 0) _exit(5);
    pthread_t t;
    if (pthread_create(&t, NULL, noop, NULL) != 0) _exit(7);
    if (pthread_join(t, NULL) != 0) _exit(8);
    _exit(0);
  }
  CHECK(post_when_blocked(b, &S->s2) == 0, "the child ended before it waited");
  wait_next = &S->s1;
  char *p = malloc(100); /* waits on s1 inside the allocator */
  CHECK(p != NULL, "malloc");
  memset(p, 1, 100);
  CHECK_EQ(waitpid(b, &st, 0), b);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child: status %#x", st);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, noop, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  printf("two processes waited on a process-shared semaphore inside their allocator\n");

  /* 3. Later process-shared waits (outside the allocator) still get every
   * post: ROUNDS handshakes, the child posting s1 after each byte read. */
  int pfd[2];
  CHECK_EQ(pipe(pfd), 0);
  fflush(stdout);
  pid_t c = fork();
  CHECK(c >= 0, "fork");
  if (c == 0) {
    close(pfd[1]);
    char x;
    for (int i = 0; i < ROUNDS; i++) {
      if (read(pfd[0], &x, 1) != 1) _exit(9);
      if (sem_post(&S->s1) != 0) _exit(10);
    }
    _exit(0);
  }
  close(pfd[0]);
  for (int i = 0; i < ROUNDS; i++) {
    CHECK_EQ(write(pfd[1], "x", 1), 1);
    while (sem_wait(&S->s1) != 0) CHECK_EQ(errno, EINTR);
  }
  CHECK_EQ(waitpid(c, &st, 0), c);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the third child: status %#x", st);
  printf("%d more waits on a process-shared semaphore\n", ROUNDS);
  return 0;
}
