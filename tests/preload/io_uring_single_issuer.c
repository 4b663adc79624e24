/* io_uring rings a thread sets up for itself alone
 * (IORING_SETUP_SINGLE_ISSUER, with DEFER_TASKRUN and COOP_TASKRUN, as fio
 * 3.33's io_uring engine asks for): the kernel ties such a ring to the
 * thread that created it (or that enabled it, for a ring created
 * IORING_SETUP_R_DISABLED), and refuses a submission or a wait from any
 * other thread with EEXIST. 8 threads each set up a ring of their own
 * through syscall(), as fio does (glibc has no wrapper), and write then
 * read back 4 KiB blocks of a file of their own through it, one request
 * at a time, with sleeps, yields and blocking calls in between; every
 * io_uring_enter must succeed and every block read back must be the one
 * written. Then: a ring created disabled and enabled by the thread that
 * uses it; a submission to a thread's ring from another thread is refused
 * with EEXIST, as natively. */
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

/* Linux 5.19-6.1 flags, absent from older kernel headers (Debian 11's). */
#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif

#define THREADS 8
#define ROUNDS 150
#define BLK 4096
#define BLOCKS 16

struct ring {
  int fd;
  unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
  unsigned *cq_head, *cq_tail, *cq_mask;
  struct io_uring_sqe *sqes;
  struct io_uring_cqe *cqes;
};

static const char *dir;

static int ring_setup(struct ring *r, unsigned flags) {
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  p.flags = flags;
  int fd = (int)syscall(__NR_io_uring_setup, 4, &p);
  if (fd < 0) return -errno;
  r->fd = fd;
  size_t sqlen = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  size_t cqlen = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
  char *sq = mmap(NULL, sqlen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
  char *cq = mmap(NULL, cqlen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
  void *sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
  CHECK(sq != MAP_FAILED && cq != MAP_FAILED && sqes != MAP_FAILED, "mmap: %s", strerror(errno));
  r->sq_head = (unsigned *)(sq + p.sq_off.head);
  r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
  r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
  r->sq_array = (unsigned *)(sq + p.sq_off.array);
  r->cq_head = (unsigned *)(cq + p.cq_off.head);
  r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
  r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
  r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
  r->sqes = sqes;
  return 0;
}

/* Queues one read or write of BLK bytes at off; returns the enter's result
 * (1, or -errno) and the completion's res in *res. */
static int ring_rw(struct ring *r, int op, int fd, void *buf, off_t off, int *res) {
  unsigned tail = __atomic_load_n(r->sq_tail, __ATOMIC_RELAXED);
  unsigned idx = tail & *r->sq_mask;
  struct io_uring_sqe *sqe = &r->sqes[idx];
  memset(sqe, 0, sizeof *sqe);
  sqe->opcode = (uint8_t)op;
  sqe->fd = fd;
  sqe->addr = (uint64_t)(uintptr_t)buf;
  sqe->len = BLK;
  sqe->off = (uint64_t)off;
  r->sq_array[idx] = idx;
  __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
  int n;
  do
    n = (int)syscall(__NR_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    /* Not submitted: take it back. */
    __atomic_store_n(r->sq_tail, tail, __ATOMIC_RELEASE);
    return -errno;
  }
  unsigned head = __atomic_load_n(r->cq_head, __ATOMIC_RELAXED);
  while (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) {
    n = (int)syscall(__NR_io_uring_enter, r->fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0);
    if (n < 0 && errno != EINTR) return -errno;
  }
  *res = r->cqes[head & *r->cq_mask].res;
  __atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
  return 1;
}

static void fill(unsigned char *b, int t, int blk, int round) {
  for (int i = 0; i < BLK; i++) b[i] = (unsigned char)(t * 131 + blk * 17 + round * 7 + i * 3);
}

static void pause_a_little(int i) {
  switch (i % 4) {
    case 0: sched_yield(); break;
    case 1: { struct timespec ts = {0, 50000}; nanosleep(&ts, NULL); break; }
    case 2: { int fd = open("/proc/self/stat", O_RDONLY); char b[512]; CHECK(read(fd, b, sizeof b) > 0, "read"); close(fd); break; }
    default: usleep(20); break;
  }
}

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  struct ring r;
  char path[512];
  int e = ring_setup(&r, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN);
  CHECK(e == 0, "thread %d: io_uring_setup: %s", t, strerror(-e));
  snprintf(path, sizeof path, "%s/f%d", dir, t);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
  unsigned char *w = malloc(BLK), *rd = malloc(BLK);
  for (int i = 0; i < ROUNDS; i++) {
    int blk = (i * 7 + t) % BLOCKS, res = 0;
    fill(w, t, blk, i);
    int n = ring_rw(&r, IORING_OP_WRITE, fd, w, (off_t)blk * BLK, &res);
    CHECK(n == 1, "thread %d round %d: io_uring_enter (write): %s", t, i, strerror(-n));
    CHECK(res == BLK, "thread %d round %d: write res %d", t, i, res);
    pause_a_little(i + t);
    memset(rd, 0, BLK);
    n = ring_rw(&r, IORING_OP_READ, fd, rd, (off_t)blk * BLK, &res);
    CHECK(n == 1, "thread %d round %d: io_uring_enter (read): %s", t, i, strerror(-n));
    CHECK(res == BLK, "thread %d round %d: read res %d", t, i, res);
    CHECK(memcmp(w, rd, BLK) == 0, "thread %d round %d: the block read back differs", t, i);
    pause_a_little(i + t + 1);
  }
  free(w);
  free(rd);
  close(fd);
  unlink(path);
  close(r.fd);
  return NULL;
}

/* A ring created disabled, enabled and used by this thread. */
static struct ring other_ring;
static void *disabled_then_enabled(void *arg) {
  (void)arg;
  struct ring r;
  int e = ring_setup(&r, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED);
  CHECK(e == 0, "io_uring_setup (disabled): %s", strerror(-e));
  sched_yield();
  CHECK(syscall(__NR_io_uring_register, r.fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) == 0,
        "IORING_REGISTER_ENABLE_RINGS: %s", strerror(errno));
  char path[512];
  snprintf(path, sizeof path, "%s/enabled", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0, "open: %s", strerror(errno));
  unsigned char w[BLK], rd[BLK];
  for (int i = 0; i < 40; i++) {
    int res = 0;
    fill(w, 99, i % BLOCKS, i);
    CHECK(ring_rw(&r, IORING_OP_WRITE, fd, w, (off_t)(i % BLOCKS) * BLK, &res) == 1 && res == BLK,
          "enabled ring: write %d", i);
    pause_a_little(i);
    CHECK(ring_rw(&r, IORING_OP_READ, fd, rd, (off_t)(i % BLOCKS) * BLK, &res) == 1 && res == BLK,
          "enabled ring: read %d", i);
    CHECK(memcmp(w, rd, BLK) == 0, "enabled ring: block %d differs", i);
  }
  close(fd);
  unlink(path);
  /* Leave a ring of this thread for main to try. */
  e = ring_setup(&other_ring, IORING_SETUP_SINGLE_ISSUER);
  CHECK(e == 0, "io_uring_setup: %s", strerror(-e));
  return NULL;
}

int main(void) {
  char tmpl[] = "/tmp/io_uring_single_issuer.XXXXXX";
  dir = mkdtemp(tmpl);
  CHECK(dir != NULL, "mkdtemp: %s", strerror(errno));
  struct ring probe;
  int e = ring_setup(&probe, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN);
  if (e != 0) {
    rmdir(dir);
    fprintf(stderr, "SKIP: io_uring with SINGLE_ISSUER|DEFER_TASKRUN unavailable: %s\n", strerror(-e));
    return 77;
  }
  close(probe.fd);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0, "create");
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  printf("%d threads x %d rounds on rings of their own: every block read back as written\n", THREADS, ROUNDS);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, disabled_then_enabled, NULL) == 0, "create");
  pthread_join(t, NULL);
  printf("a ring created disabled works for the thread that enabled it\n");
  /* Another thread's ring refuses main's submission, as natively. */
  char path[512];
  snprintf(path, sizeof path, "%s/other", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  unsigned char w[BLK];
  int res = 0;
  fill(w, 1, 1, 1);
  int n = ring_rw(&other_ring, IORING_OP_WRITE, fd, w, 0, &res);
  CHECK(n == -EEXIST, "submitting to another thread's ring: %d, expected -EEXIST", n);
  printf("another thread's ring refuses a submission: EEXIST\n");
  close(fd);
  unlink(path);
  rmdir(dir);
  return 0;
}
