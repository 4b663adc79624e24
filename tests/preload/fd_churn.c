/* fd numbers closed by one thread and handed out again by the kernel to
 * another, all at once: worker threads open, use and close regular files,
 * pipes, socketpairs, loopback TCP connections (connect and accept) and
 * dup/dup2/dup3/F_DUPFD copies in a loop, so that every new number is one
 * another thread has just closed. Every read is checked byte for byte
 * (each file, pipe and connection carries content of its own), and every
 * new fd's flags (F_GETFL, F_GETFD) must be those of the new file: nothing
 * of the number's previous file may stick to it.
 *
 * Also, in the same churn:
 *  - dup2 onto a pipe another thread is blocked reading: the reader gets
 *    either its own pipe's data (it was blocked on it) or the data of the
 *    file that replaced it (it came later), never anything else;
 *  - fcntl(F_SETFL)/F_GETFL and dup3(O_CLOEXEC) on fresh numbers.
 *
 *  - then, alone: close of a number another thread is blocked reading,
 *    and the number reused at once (close_phase).
 *
 * Any error or wrong byte exits 1. The output does not depend on timing. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define NFILES 64
#define FILE_MAX 3000
#define NFILEW 4  /* regular-file workers */
#define NPIPEW 2  /* pipe / socketpair workers */
#define NTCPW 2   /* TCP clients (one acceptor serves them) */
#define NBLKW 1   /* dup2-over-a-blocked-reader workers (each with a reader) */

static int iters;
static char dir[64];

static unsigned rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return *s >> 8;
}

/* Byte j of a stream identified by key. */
static unsigned char content(uint32_t key, size_t j) {
  uint32_t x = key * 2654435761u + (uint32_t)j * 40503u;
  x ^= x >> 13;
  return (unsigned char)(x ^ (x >> 7) ^ (key >> 3));
}
static size_t file_len(int i) { return 1 + (size_t)(i * 977) % FILE_MAX; }

static void fill(unsigned char *b, uint32_t key, size_t n) {
  for (size_t j = 0; j < n; j++) b[j] = content(key, j);
}
static int matches(const unsigned char *b, uint32_t key, size_t n) {
  for (size_t j = 0; j < n; j++)
    if (b[j] != content(key, j)) return 0;
  return 1;
}
static void verify(const unsigned char *b, uint32_t key, size_t n, const char *what, int it) {
  for (size_t j = 0; j < n; j++)
    CHECK(b[j] == content(key, j), "%s (iteration %d): byte %zu is wrong: not this file's data",
          what, it, j);
}

/* Reads exactly n bytes (the writer is in this process). */
static void read_full(int fd, unsigned char *b, size_t n, const char *what, int it) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, b + got, n - got);
    CHECK(r > 0, "%s (iteration %d): read(%d) = %zd: %s", what, it, fd, r,
          r < 0 ? strerror(errno) : "EOF");
    got += (size_t)r;
  }
}
static void write_full(int fd, const unsigned char *b, size_t n, const char *what, int it) {
  size_t put = 0;
  while (put < n) {
    ssize_t r = write(fd, b + put, n - put);
    CHECK(r > 0, "%s (iteration %d): write(%d) = %zd: %s", what, it, fd, r, strerror(errno));
    put += (size_t)r;
  }
}

static void expect_fl(int fd, int want, const char *what, int it) {
  int fl = fcntl(fd, F_GETFL);
  CHECK(fl >= 0, "%s (iteration %d): F_GETFL(%d): %s", what, it, fd, strerror(errno));
  CHECK((fl & (O_ACCMODE | O_NONBLOCK)) == want,
        "%s (iteration %d): F_GETFL(%d) = %#x, want access/O_NONBLOCK %#x", what, it, fd, fl, want);
}
static void expect_cloexec(int fd, int want, const char *what, int it) {
  int fl = fcntl(fd, F_GETFD);
  CHECK(fl >= 0, "%s (iteration %d): F_GETFD(%d): %s", what, it, fd, strerror(errno));
  CHECK(((fl & FD_CLOEXEC) != 0) == want, "%s (iteration %d): FD_CLOEXEC of %d is %d", what, it,
        fd, (fl & FD_CLOEXEC) != 0);
}

static atomic_int go;
static void start_line(void) {
  while (!atomic_load(&go)) sched_yield();
}

/* ---- regular files ----------------------------------------------------------------------------- */

static void check_file(int fd, int i, int whole, const char *what, int it) {
  unsigned char b[FILE_MAX + 16];
  size_t n = file_len(i);
  if (whole) {
    /* read() until EOF, in small pieces (several calls on the number). */
    size_t got = 0;
    for (;;) {
      /* Never past b: qemu-user checks the whole range is mapped (EFAULT
       * at EOF with a buffer that ends at the top of a stack). */
      size_t want = sizeof b - got < 700 ? sizeof b - got : 700;
      ssize_t r = read(fd, b + got, want);
      CHECK(r >= 0, "%s (iteration %d): read(%d) = %zd: %s", what, it, fd, r, strerror(errno));
      if (r == 0) break;
      got += (size_t)r;
      CHECK(got <= n, "%s (iteration %d): file %d longer than %zu", what, it, i, n);
    }
    CHECK(got == n, "%s (iteration %d): file %d: read %zu bytes, want %zu", what, it, i, got, n);
  } else {
    ssize_t r = pread(fd, b, sizeof b, 0);
    CHECK(r == (ssize_t)n, "%s (iteration %d): pread(%d) = %zd (want %zu): %s", what, it, fd, r,
          n, r < 0 ? strerror(errno) : "short");
  }
  verify(b, 1000 + (uint32_t)i, n, what, it);
}

static void *file_worker(void *arg) {
  int id = (int)(intptr_t)arg;
  unsigned s = 17 + (unsigned)id;
  char path[128];
  start_line();
  for (int it = 0; it < iters; it++) {
    int i = (int)(rnd(&s) % NFILES);
    snprintf(path, sizeof path, "%s/f%d", dir, i);
    int fd = open(path, O_RDONLY | (rnd(&s) % 2 ? O_CLOEXEC : 0));
    CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
    unsigned how = rnd(&s) % 8;
    if (how == 0) {
      /* Read through a copy, then through the original. */
      int c = rnd(&s) % 2 ? dup(fd) : fcntl(fd, F_DUPFD_CLOEXEC, 3);
      CHECK(c >= 0, "dup: %s", strerror(errno));
      expect_fl(c, O_RDONLY, "file copy", it);
      check_file(c, i, 1, "file via dup", it);
      CHECK(close(c) == 0, "close copy: %s", strerror(errno));
      check_file(fd, i, 0, "file after its copy closed", it);
    } else if (how == 1) {
      /* dup2/dup3 of another file onto this number. */
      int j = (int)(rnd(&s) % NFILES);
      snprintf(path, sizeof path, "%s/f%d", dir, j);
      int o = open(path, O_RDONLY);
      CHECK(o >= 0, "open %s: %s", path, strerror(errno));
      int cl = rnd(&s) % 2;
      int r = cl ? dup3(o, fd, O_CLOEXEC) : dup2(o, fd);
      CHECK(r == fd, "dup2/dup3 onto %d: %d %s", fd, r, strerror(errno));
      CHECK(close(o) == 0, "close: %s", strerror(errno));
      expect_cloexec(fd, cl, "dup3 target", it);
      i = j;
      check_file(fd, i, 1, "file after dup2 onto its number", it);
    } else {
      expect_fl(fd, O_RDONLY, "fresh file", it);
      check_file(fd, i, how & 1, "file", it);
    }
    CHECK(close(fd) == 0, "close(%d): %s", fd, strerror(errno));
  }
  return NULL;
}

/* ---- pipes and socketpairs ----------------------------------------------------------------------- */

static void *pipe_worker(void *arg) {
  int id = (int)(intptr_t)arg;
  unsigned s = 101 + (unsigned)id;
  unsigned char w[4096], r[4096];
  start_line();
  for (int it = 0; it < iters; it++) {
    int p[2];
    unsigned how = rnd(&s) % 4;
    int nb = rnd(&s) % 4 == 0;
    const char *what;
    if (how < 2) {
      what = "pipe";
      CHECK(pipe2(p, nb ? O_NONBLOCK : 0) == 0, "pipe2: %s", strerror(errno));
      expect_fl(p[0], O_RDONLY | (nb ? O_NONBLOCK : 0), what, it);
      expect_fl(p[1], O_WRONLY | (nb ? O_NONBLOCK : 0), what, it);
    } else {
      what = "socketpair";
      CHECK(socketpair(AF_UNIX, SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0), 0, p) == 0,
            "socketpair: %s", strerror(errno));
      expect_fl(p[0], O_RDWR | (nb ? O_NONBLOCK : 0), what, it);
      expect_fl(p[1], O_RDWR | (nb ? O_NONBLOCK : 0), what, it);
    }
    if (how == 1) {
      /* The program switches the mode itself: the view must follow. */
      CHECK(fcntl(p[0], F_SETFL, nb ? 0 : O_NONBLOCK) == 0, "F_SETFL: %s", strerror(errno));
      nb = !nb;
      expect_fl(p[0], O_RDONLY | (nb ? O_NONBLOCK : 0), "pipe after F_SETFL", it);
    }
    if (how == 3) {
      /* Read through a dup3(O_CLOEXEC) copy on a fresh number. */
      int spare = dup(p[1]);
      CHECK(spare >= 0, "dup: %s", strerror(errno));
      int c = dup3(p[0], spare, O_CLOEXEC);
      CHECK(c == spare, "dup3: %s", strerror(errno));
      expect_cloexec(c, 1, "socketpair dup3 copy", it);
      CHECK(close(p[0]) == 0, "close: %s", strerror(errno));
      p[0] = c;
    }
    uint32_t key = 50000 + (uint32_t)id * 1000003u + (uint32_t)it;
    size_t n = 1 + rnd(&s) % sizeof w;
    fill(w, key, n);
    write_full(p[1], w, n, what, it);
    read_full(p[0], r, n, what, it);
    verify(r, key, n, what, it);
    if (how >= 2) {
      /* and back the other way */
      fill(w, key + 7, n);
      write_full(p[0], w, n, what, it);
      read_full(p[1], r, n, what, it);
      verify(r, key + 7, n, what, it);
    }
    if (!nb) {
      /* EOF once the writer is closed: a blocking read returns 0. */
      int rd = p[0], wr = p[1];
      CHECK(close(wr) == 0, "close: %s", strerror(errno));
      ssize_t e = read(rd, r, 1);
      CHECK(e == 0, "%s (iteration %d): read after the peer closed = %zd %s", what, it, e,
            e < 0 ? strerror(errno) : "");
      CHECK(close(rd) == 0, "close: %s", strerror(errno));
    } else {
      CHECK(close(p[0]) == 0 && close(p[1]) == 0, "close: %s", strerror(errno));
    }
  }
  return NULL;
}

/* ---- loopback TCP: connect and accept ------------------------------------------------------------ */

static int listener;
static struct sockaddr_in laddr;
static atomic_int clients_left;

/* The server side of one connection: reads the client's key and length,
 * then that many bytes, checks them, sends them back transformed. */
static void serve(int c, int it) {
  unsigned char hdr[8], b[8192];
  read_full(c, hdr, 8, "tcp server header", it);
  uint32_t key, n;
  memcpy(&key, hdr, 4);
  memcpy(&n, hdr + 4, 4);
  CHECK(n <= sizeof b, "tcp server: length %u", n);
  read_full(c, b, n, "tcp server", it);
  verify(b, key, n, "tcp server", it);
  fill(b, key ^ 0x5a5a5a5au, n);
  write_full(c, b, n, "tcp server", it);
}

static void *acceptor(void *arg) {
  start_line();
  for (int it = 0;; it++) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int c = accept4(listener, (struct sockaddr *)&a, &al, it % 3 == 0 ? SOCK_CLOEXEC : 0);
    CHECK(c >= 0, "accept: %s", strerror(errno));
    expect_fl(c, O_RDWR, "accepted socket", it);
    expect_cloexec(c, it % 3 == 0, "accepted socket", it);
    unsigned char h;
    /* A 1-byte opener: 'q' asks the acceptor to stop. */
    read_full(c, &h, 1, "tcp opener", it);
    if (h == 'q') {
      close(c);
      break;
    }
    serve(c, it);
    CHECK(close(c) == 0, "close accepted: %s", strerror(errno));
  }
  return NULL;
}

static void *tcp_worker(void *arg) {
  int id = (int)(intptr_t)arg;
  unsigned s = 333 + (unsigned)id;
  unsigned char w[8192], r[8192];
  start_line();
  int n_it = iters / 4 > 0 ? iters / 4 : 1;
  for (int it = 0; it < n_it; it++) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(c >= 0, "socket: %s", strerror(errno));
    expect_fl(c, O_RDWR, "tcp socket", it);
    CHECK(connect(c, (struct sockaddr *)&laddr, sizeof laddr) == 0, "connect: %s",
          strerror(errno));
    uint32_t key = 900000 + (uint32_t)id * 7919u + (uint32_t)it;
    uint32_t n = 1 + rnd(&s) % sizeof w;
    unsigned char hdr[9] = {'c'};
    memcpy(hdr + 1, &key, 4);
    memcpy(hdr + 5, &n, 4);
    write_full(c, hdr, 9, "tcp client", it);
    fill(w, key, n);
    write_full(c, w, n, "tcp client", it);
    read_full(c, r, n, "tcp client", it);
    verify(r, key ^ 0x5a5a5a5au, n, "tcp client", it);
    ssize_t e = read(c, r, 1);
    CHECK(e == 0, "tcp client (iteration %d): read after the server closed = %zd %s", it, e,
          e < 0 ? strerror(errno) : "");
    CHECK(close(c) == 0, "close: %s", strerror(errno));
  }
  if (atomic_fetch_sub(&clients_left, 1) == 1) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(c >= 0 && connect(c, (struct sockaddr *)&laddr, sizeof laddr) == 0, "connect: %s",
          strerror(errno));
    write_full(c, (const unsigned char *)"q", 1, "tcp quit", 0);
    close(c);
  }
  return NULL;
}

/* ---- dup2 onto a number another thread is blocked reading ------------------------------------------
 * The worker hands its reader the read end of a fresh pipe A (through a
 * control pipe), then replaces that number with the read end of pipe B,
 * which already holds B's data, then writes A's data into A. The reader
 * gets A's data if it was blocked on A (Linux: a blocked read keeps its
 * file), B's if it called read after the dup2; anything else is wrong. */

struct blk {
  int ctl[2];   /* worker -> reader: the number to read */
  int back[2];  /* reader -> worker: which data it got (key) */
  int id;
};

static void *blk_reader(void *arg) {
  struct blk *b = arg;
  unsigned char buf[4096];
  for (;;) {
    int msg[3];
    read_full(b->ctl[0], (unsigned char *)msg, sizeof msg, "blocked-reader control", 0);
    if (msg[0] < 0) break;
    int fd = msg[0];
    uint32_t ka = (uint32_t)msg[1], kb = ka + 1;
    size_t n = (size_t)msg[2];
    /* One read: the writer writes all n bytes at once (n <= PIPE_BUF). */
    ssize_t r = read(fd, buf, n);
    CHECK(r == (ssize_t)n, "blocked reader: read(%d) = %zd (want %zu): %s", fd, r, n,
          r < 0 ? strerror(errno) : "short");
    uint32_t got = matches(buf, ka, n) ? ka : kb;
    verify(buf, got, n, "blocked reader (its pipe or the file dup2'd onto its number)", 0);
    write_full(b->back[1], (unsigned char *)&got, 4, "blocked-reader reply", 0);
  }
  return NULL;
}

static void *blk_worker(void *arg) {
  struct blk *b = arg;
  unsigned s = 4242 + (unsigned)b->id;
  unsigned char w[4096], r[4096];
  start_line();
  for (int it = 0; it < iters / 2; it++) {
    int a[2], bp[2];
    CHECK(pipe(a) == 0 && pipe(bp) == 0, "pipe: %s", strerror(errno));
    uint32_t ka = 7000000 + (uint32_t)b->id * 100003u + (uint32_t)it * 2, kb = ka + 1;
    size_t n = 64 + rnd(&s) % 4000;  /* <= PIPE_BUF: one write, one read */
    fill(w, kb, n);
    write_full(bp[1], w, n, "pipe B", it);
    int msg[3] = {a[0], (int)ka, (int)n};
    write_full(b->ctl[1], (unsigned char *)msg, sizeof msg, "blocked-reader control", it);
    if (rnd(&s) % 2) sched_yield();
    int cl = rnd(&s) % 2;
    CHECK((cl ? dup3(bp[0], a[0], O_CLOEXEC) : dup2(bp[0], a[0])) == a[0], "dup2: %s",
          strerror(errno));
    /* Pipe A has a reader only if the reader is blocked on it. */
    fill(w, ka, n);
    ssize_t wa = write(a[1], w, n);
    CHECK(wa == (ssize_t)n || (wa < 0 && errno == EPIPE), "pipe A (iteration %d): write = %zd: %s",
          it, wa, strerror(errno));
    uint32_t got;
    read_full(b->back[0], (unsigned char *)&got, 4, "blocked-reader reply", it);
    if (wa > 0) {
      /* It was blocked on A: it got A's data, B's is still in B. */
      CHECK(got == ka, "iteration %d: pipe A had a reader, but the reader got pipe B's data", it);
      read_full(a[0], r, n, "pipe B after the reader took A's data", it);  /* a[0] is B now */
      verify(r, kb, n, "pipe B after the reader took A's data", it);
    } else {
      /* It came after the dup2: it got B's data. */
      CHECK(got == kb, "iteration %d: pipe A had no reader, but the reader got its data", it);
    }
    CHECK(close(a[0]) == 0 && close(a[1]) == 0 && close(bp[0]) == 0 && close(bp[1]) == 0,
          "close: %s", strerror(errno));
  }
  int stop[3] = {-1, 0, 0};
  write_full(b->ctl[1], (unsigned char *)stop, sizeof stop, "blocked-reader control", 0);
  return NULL;
}

/* ---- close of a number another thread is blocked reading, then reuse ------------------------------
 * A phase of its own (no other thread creates fds, so the number can only
 * go to this pair's files). The closer hands its reader the read end of
 * pipe A, closes it, makes pipe B (which usually gets the number), writes
 * B's data into B, then A's data into A. The reader was blocked on A
 * (Linux: it keeps the file and gets A's data; A's write succeeds because
 * A still has a reader), or came after the close (EBADF, or B's data if B
 * had the number by then; A's write fails with EPIPE). Anything else, or a
 * mismatch between the reader's outcome and A's write, is wrong. */

static int cl_ctl[2], cl_back[2];

static void *cl_reader(void *arg) {
  unsigned char buf[4096];
  for (;;) {
    int msg[3];
    read_full(cl_ctl[0], (unsigned char *)msg, sizeof msg, "close-reader control", 0);
    if (msg[0] < 0) break;
    uint32_t ka = (uint32_t)msg[1], kb = ka + 1, got;
    size_t n = (size_t)msg[2];
    ssize_t r = read(msg[0], buf, n);
    if (r < 0) {
      CHECK(errno == EBADF, "close-reader: read(%d): %s", msg[0], strerror(errno));
      got = 0;
    } else {
      CHECK(r == (ssize_t)n, "close-reader: read(%d) = %zd, want %zu", msg[0], r, n);
      got = matches(buf, ka, n) ? ka : kb;
      verify(buf, got, n, "close-reader (its pipe, or the pipe that took its number)", 0);
    }
    write_full(cl_back[1], (unsigned char *)&got, 4, "close-reader reply", 0);
  }
  return NULL;
}

static void close_phase(void) {
  CHECK(pipe(cl_ctl) == 0 && pipe(cl_back) == 0, "pipe");
  pthread_t t;
  CHECK(pthread_create(&t, NULL, cl_reader, NULL) == 0, "create");
  unsigned s = 99;
  unsigned char w[4096], r[4096];
  int outcomes[3] = {0, 0, 0};
  for (int it = 0; it < iters / 2; it++) {
    int a[2], b[2];
    CHECK(pipe(a) == 0, "pipe: %s", strerror(errno));
    uint32_t ka = 80000000 + (uint32_t)it * 2, kb = ka + 1;
    size_t n = 64 + rnd(&s) % 4000;
    int msg[3] = {a[0], (int)ka, (int)n};
    write_full(cl_ctl[1], (unsigned char *)msg, sizeof msg, "close-reader control", it);
    if (rnd(&s) % 2) sched_yield();
    CHECK(close(a[0]) == 0, "close: %s", strerror(errno));
    CHECK(pipe(b) == 0, "pipe: %s", strerror(errno));
    fill(w, kb, n);
    write_full(b[1], w, n, "pipe B", it);
    fill(w, ka, n);
    ssize_t wa = write(a[1], w, n);
    CHECK(wa == (ssize_t)n || (wa < 0 && errno == EPIPE), "pipe A (iteration %d): write = %zd: %s",
          it, wa, strerror(errno));
    uint32_t got;
    read_full(cl_back[0], (unsigned char *)&got, 4, "close-reader reply", it);
    if (wa > 0) {
      CHECK(got == ka, "iteration %d: the reader kept pipe A open but got %s", it,
            got ? "pipe B's data" : "EBADF");
      outcomes[0]++;
    } else {
      CHECK(got != ka, "iteration %d: pipe A had no reader, but the reader got its data", it);
      outcomes[got ? 1 : 2]++;
    }
    if (got != kb) {
      /* B's data is still in B. */
      read_full(b[0], r, n, "pipe B", it);
      verify(r, kb, n, "pipe B", it);
    }
    CHECK(close(a[1]) == 0 && close(b[0]) == 0 && close(b[1]) == 0, "close: %s", strerror(errno));
  }
  int stop[3] = {-1, 0, 0};
  write_full(cl_ctl[1], (unsigned char *)stop, sizeof stop, "close-reader control", 0);
  pthread_join(t, NULL);
  close(cl_ctl[0]);
  close(cl_ctl[1]);
  close(cl_back[0]);
  close(cl_back[1]);
  if (getenv("FD_CHURN_VERBOSE"))
    fprintf(stderr, "close under a reader: kept its pipe %d, got the new pipe %d, EBADF %d\n",
            outcomes[0], outcomes[1], outcomes[2]);
}

int main(int argc, char **argv) {
  iters = env_int("FD_CHURN_ITERS", 3000);
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  snprintf(dir, sizeof dir, "/tmp/fd_churn.XXXXXX");
  CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
  unsigned char b[FILE_MAX];
  char path[128];
  for (int i = 0; i < NFILES; i++) {
    snprintf(path, sizeof path, "%s/f%d", dir, i);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
    fill(b, 1000 + (uint32_t)i, file_len(i));
    write_full(fd, b, file_len(i), "create", 0);
    close(fd);
  }

  listener = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(listener >= 0, "socket: %s", strerror(errno));
  memset(&laddr, 0, sizeof laddr);
  laddr.sin_family = AF_INET;
  laddr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(listener, (struct sockaddr *)&laddr, sizeof laddr) == 0, "bind: %s", strerror(errno));
  socklen_t al = sizeof laddr;
  CHECK(getsockname(listener, (struct sockaddr *)&laddr, &al) == 0, "getsockname");
  CHECK(listen(listener, 64) == 0, "listen: %s", strerror(errno));
  atomic_store(&clients_left, NTCPW);

  pthread_t t[64];
  int nt = 0;
  for (int i = 0; i < NFILEW; i++)
    CHECK(pthread_create(&t[nt++], NULL, file_worker, (void *)(intptr_t)i) == 0, "create");
  for (int i = 0; i < NPIPEW; i++)
    CHECK(pthread_create(&t[nt++], NULL, pipe_worker, (void *)(intptr_t)i) == 0, "create");
  CHECK(pthread_create(&t[nt++], NULL, acceptor, NULL) == 0, "create");
  for (int i = 0; i < NTCPW; i++)
    CHECK(pthread_create(&t[nt++], NULL, tcp_worker, (void *)(intptr_t)i) == 0, "create");
  static struct blk blks[NBLKW];
  for (int i = 0; i < NBLKW; i++) {
    blks[i].id = i;
    CHECK(pipe(blks[i].ctl) == 0 && pipe(blks[i].back) == 0, "pipe");
    CHECK(pthread_create(&t[nt++], NULL, blk_reader, &blks[i]) == 0, "create");
    CHECK(pthread_create(&t[nt++], NULL, blk_worker, &blks[i]) == 0, "create");
  }
  atomic_store(&go, 1);
  for (int i = 0; i < nt; i++) pthread_join(t[i], NULL);
  close_phase();

  for (int i = 0; i < NFILES; i++) {
    snprintf(path, sizeof path, "%s/f%d", dir, i);
    unlink(path);
  }
  rmdir(dir);
  close(listener);
  printf("fd churn: %d file, %d pipe/socketpair, %d tcp and %d blocked-reader workers, %d "
         "iterations each, then close under a blocked reader: every read had its own file's "
         "data\n",
         NFILEW, NPIPEW, NTCPW, NBLKW, iters);
  return 0;
}
