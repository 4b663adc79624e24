/* dprintf writes inside libc, behind any interposer: 200 KB into a pipe
 * whose reader starts late must all arrive, as natively (a pipe goshim had
 * made non-blocking underneath would fail with EAGAIN once full). Both
 * dprintf and its _FORTIFY_SOURCE form __dprintf_chk. The reader starts
 * once the writer's kernel thread sleeps (blocked on the full pipe). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

int __dprintf_chk(int fd, int flag, const char *fmt, ...);

enum { CHUNK = 1000, NCHUNK = 200 };
static int p[2];
static long got;
static volatile int writer_tid, writer_done;

static void *late_reader(void *arg) {
  wait_tid_asleep(writer_tid, &writer_done); /* the pipe (64 KiB) is full */
  char buf[4096];
  long n;
  while ((n = read(p[0], buf, sizeof buf)) > 0)
    for (long i = 0; i < n; i++) {
      CHECK(buf[i] == 'a' + (got / CHUNK) % 26, "byte %ld is %c", got, buf[i]);
      got++;
    }
  return NULL;
}

static void one_round(int fortified) {
  CHECK_EQ(pipe(p), 0);
  got = 0;
  writer_tid = self_tid();
  writer_done = 0;
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, late_reader, NULL), 0);
  static char line[CHUNK + 1];
  for (int c = 0; c < NCHUNK; c++) {
    memset(line, 'a' + c % 26, CHUNK);
    line[CHUNK] = 0;
    int n = fortified ? __dprintf_chk(p[1], 1, "%s", line) : dprintf(p[1], "%s", line);
    CHECK(n == CHUNK, "dprintf chunk %d returned %d (%s)", c, n, n < 0 ? strerror(errno) : "");
  }
  writer_done = 1;
  CHECK_EQ(close(p[1]), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  CHECK(got == (long)CHUNK * NCHUNK, "reader got %ld", got);
  close(p[0]);
}

int main(void) {
  one_round(0);
  one_round(1);
  printf("dprintf: %d bytes through a full pipe, twice\n", CHUNK * NCHUNK);
  return 0;
}
