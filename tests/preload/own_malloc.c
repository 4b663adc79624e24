/* A program whose executable defines the allocator (malloc, free, calloc,
 * realloc, the aligned ones), as a program with a statically linked
 * jemalloc or mimalloc does (rustc, for one). The executable comes first in
 * the global scope, so glibc's own allocations (the CPU set of a
 * pthread_getattr_np attribute, stdio buffers, strdup) come from this
 * allocator, and whatever frees them must free them here. Every free() is
 * checked to be of a block this allocator handed out and still holds.
 *
 * Exercised: pthread_getattr_np + pthread_attr_destroy on the initial
 * thread and on threads; an attribute with a CPU set (set, read back,
 * copied by pthread_create, replaced, destroyed); glibc calls that
 * allocate (strdup, fopen/fclose, getline) from many threads. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common.h"

/* ---- the allocator: a bump arena with a header per block ---------------- */
#define ARENA (1UL << 32)
#define LIVE 0x6c6976656c697665UL
#define FREED 0x6672656564667265UL

struct hdr {
  uint64_t magic;
  uint64_t size;
};

static char *arena;
static uintptr_t next_off;

static void die(const char *msg) {
  ssize_t r = write(2, msg, strlen(msg));
  (void)r;
  abort();
}

static char *arena_base(void) {
  char *a = __atomic_load_n(&arena, __ATOMIC_ACQUIRE);
  if (a) return a;
  char *m = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (m == MAP_FAILED) die("own_malloc: mmap failed\n");
  char *expected = NULL;
  if (!__atomic_compare_exchange_n(&arena, &expected, m, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    munmap(m, ARENA);
    return expected;
  }
  return m;
}

static void *alloc_aligned(size_t align, size_t size) {
  if (align < 16) align = 16;
  if (size > ARENA / 4) {
    errno = ENOMEM;
    return NULL;
  }
  char *base = arena_base();
  size_t need = sizeof(struct hdr) + align + ((size + 15) & ~(size_t)15);
  uintptr_t off = __atomic_fetch_add(&next_off, need, __ATOMIC_RELAXED);
  if (off + need > ARENA) die("own_malloc: arena exhausted\n");
  uintptr_t p = (uintptr_t)base + off + sizeof(struct hdr);
  p = (p + align - 1) & ~(uintptr_t)(align - 1);
  struct hdr *h = (struct hdr *)p - 1;
  h->size = size;
  h->magic = LIVE;
  return (void *)p;
}

static struct hdr *header_of(void *p, const char *what) {
  char *base = __atomic_load_n(&arena, __ATOMIC_ACQUIRE);
  if (!base || (char *)p < base + sizeof(struct hdr) || (char *)p >= base + ARENA) {
    char msg[160];
    snprintf(msg, sizeof msg, "own_malloc: %s of %p, which this allocator never handed out\n",
             what, p);
    die(msg);
  }
  struct hdr *h = (struct hdr *)p - 1;
  if (h->magic != LIVE) {
    char msg[160];
    snprintf(msg, sizeof msg, "own_malloc: %s of %p, %s\n", what, p,
             h->magic == FREED ? "already freed" : "not a block's start");
    die(msg);
  }
  return h;
}

void *malloc(size_t n) { return alloc_aligned(16, n); }
void free(void *p) {
  if (!p) return;
  header_of(p, "free")->magic = FREED;
}
void *calloc(size_t a, size_t b) {
  size_t n;
  if (__builtin_mul_overflow(a, b, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  return alloc_aligned(16, n); /* fresh arena memory is zero */
}
void *realloc(void *p, size_t n) {
  if (!p) return malloc(n);
  struct hdr *h = header_of(p, "realloc");
  void *q = malloc(n);
  if (!q) return NULL;
  memcpy(q, p, h->size < n ? h->size : n);
  h->magic = FREED;
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
size_t malloc_usable_size(void *p) { return p ? header_of(p, "malloc_usable_size")->size : 0; }

/* ---- the program ------------------------------------------------------- */
#define THREADS 8
#define ROUNDS 40

static void check_own_attr(pthread_t t) {
  pthread_attr_t a;
  CHECK_EQ(pthread_getattr_np(t, &a), 0);
  void *addr = NULL;
  size_t size = 0;
  CHECK_EQ(pthread_attr_getstack(&a, &addr, &size), 0);
  CHECK(addr != NULL && size >= 16384, "stack %p size %zu", addr, size);
  cpu_set_t set, want;
  CHECK_EQ(pthread_attr_getaffinity_np(&a, sizeof set, &set), 0);
  CHECK_EQ(sched_getaffinity(0, sizeof want, &want), 0);
  CHECK(CPU_EQUAL(&set, &want), "the attribute's CPU set is not the thread's");
  CHECK_EQ(pthread_attr_destroy(&a), 0);
}

static void *worker(void *arg) {
  long id = (long)(intptr_t)arg;
  for (int r = 0; r < ROUNDS; r++) {
    check_own_attr(pthread_self());
    char buf[64];
    snprintf(buf, sizeof buf, "thread %ld round %d", id, r);
    char *s = strdup(buf);
    CHECK(s && strcmp(s, buf) == 0, "strdup");
    free(s);
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL, "fopen: %s", strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int found = 0;
    while (getline(&line, &cap, f) > 0)
      if (strncmp(line, "Name:", 5) == 0) found = 1;
    free(line);
    CHECK_EQ(fclose(f), 0);
    CHECK(found, "no Name: line in /proc/self/status");
    /* an attribute with a CPU set, replaced and destroyed */
    pthread_attr_t a;
    cpu_set_t set;
    CHECK_EQ(pthread_attr_init(&a), 0);
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    CHECK_EQ(pthread_attr_setaffinity_np(&a, sizeof set, &set), 0);
    CHECK_EQ(pthread_attr_setaffinity_np(&a, sizeof set / 2, &set), 0);
    cpu_set_t back;
    CPU_ZERO(&back);
    CHECK_EQ(pthread_attr_getaffinity_np(&a, sizeof set / 2, &back), 0);
    CHECK(CPU_ISSET(0, &back), "CPU 0 not in the set read back");
    cpu_set_t *volatile none = NULL; /* glibc: clears the set */
    CHECK_EQ(pthread_attr_setaffinity_np(&a, 0, none), 0);
    CHECK_EQ(pthread_attr_destroy(&a), 0);
  }
  return arg;
}

int main(void) {
  check_own_attr(pthread_self());

  /* a thread created with an attribute that holds a CPU set (every CPU
   * this process may use, so the thread runs as natively) */
  pthread_attr_t a;
  cpu_set_t all;
  CHECK_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  CHECK_EQ(pthread_attr_init(&a), 0);
  CHECK_EQ(pthread_attr_setaffinity_np(&a, sizeof all, &all), 0);
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++)
    CHECK_EQ(pthread_create(&t[i], i == 0 ? &a : NULL, worker, (void *)(intptr_t)i), 0);
  CHECK_EQ(pthread_attr_destroy(&a), 0);
  for (long i = 0; i < THREADS; i++) {
    void *ret;
    CHECK_EQ(pthread_join(t[i], &ret), 0);
    CHECK(ret == (void *)(intptr_t)i, "thread %ld returned %p", i, ret);
  }
  check_own_attr(pthread_self());
  printf("own allocator: %d threads x %d rounds of attributes and glibc allocations\n", THREADS,
         ROUNDS);
  return 0;
}
