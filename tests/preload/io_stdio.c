/* stdio doing I/O inside libc (behind goshim's back) on fds that goshim
 * created: a pipe made stderr with dup2 and written with fwrite while the
 * reader lags, and fgets on an fdopen'ed socket while the peer writes
 * slowly. goshim gives such files their blocking mode back (stdio would
 * otherwise see EAGAIN), so libc's own read/write block the kernel thread:
 * at GOSHIM_MAXPROCS=1 the other thread can only run once sysmon retakes
 * the processor from the blocked one (DESIGN.md decision 7). */
#include <errno.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

/* The main thread's kernel thread id: the other thread acts once it
   sleeps (blocked in its write on the full pipe, or in fgets's read), or
   once main_done says its call returned. */
static volatile int main_tid, main_done;
static int wa_fd, rd_fd;

static int st_fd;
static size_t st_n;
static void *slow_drain(void *arg) {
  wait_tid_asleep(main_tid, &main_done); /* the writer fills the pipe first */
  char buf[4096];
  size_t got = 0;
  ssize_t r;
  while ((r = read(st_fd, buf, sizeof buf)) > 0) got += (size_t)r;
  st_n = got;
  return NULL;
}

static void *line_writer(void *arg) {
  wait_tid_asleep(main_tid, &main_done); /* fgets waits for the line */
  CHECK(write(wa_fd, "hello ", 6) == 6, "line write");
  /* fgets took "hello " (nothing unread in the socket) and waits again. */
  long long t0 = mono_ns_();
  int unread;
  while (ioctl(rd_fd, FIONREAD, &unread) == 0 && unread > 0) {
    CHECK(mono_ns_() - t0 < 30000000000LL, "fgets never read the first half");
    sched_yield();
  }
  wait_tid_asleep(main_tid, &main_done);
  CHECK(write(wa_fd, "world\n", 6) == 6, "line write");
  return NULL;
}

static void test_stdio(void) {
  /* A pipe made stderr: stdio writes it from inside libc. */
  int p[2];
  CHECK(pipe(p) == 0, "pipe");
  int saved = dup(2);
  CHECK(dup2(p[1], 2) == 2, "dup2");
  close(p[1]);
  st_fd = p[0];
  pthread_t t;
  main_tid = self_tid();
  main_done = 0;
  pthread_create(&t, NULL, slow_drain, NULL);
  char *big = malloc(300000);
  memset(big, 'e', 300000);
  size_t w = fwrite(big, 1, 300000, stderr);
  int err = ferror(stderr);
  fflush(stderr);
  main_done = 1;
  dup2(saved, 2);
  close(saved);
  pthread_join(t, NULL);
  printf("stdio on a pipe made stderr: fwrite %zu, error %d, reader got %zu\n", w, err, st_n);
  clearerr(stderr);
  close(p[0]);
  free(big);

  /* fdopen of a socket, read with fgets while the peer writes slowly. */
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
  FILE *f = fdopen(sv[0], "r");
  wa_fd = sv[1];
  rd_fd = sv[0];
  main_done = 0;
  pthread_create(&t, NULL, line_writer, NULL);
  char line[64];
  char *l = fgets(line, sizeof line, f);
  main_done = 1;
  pthread_join(t, NULL);
  printf("fgets on an fdopen'ed socket: %s (%zu bytes)\n", l ? "ok" : "NULL", l ? strlen(line) : 0);
  fclose(f);
  close(sv[1]);
}


int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_stdio();
  return 0;
}
