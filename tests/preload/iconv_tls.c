/* Threads that exist before glibc loads an iconv module with initial-exec
 * TLS (mod_gconv_tls, named in a gconv-modules file under GCONV_PATH) call
 * iconv_open and iconv: glibc loads the module inside iconv_open (its own
 * dlopen, not the program's), and every thread, the loading one and those
 * that waited for glibc's gconv lock, must see the module's TLS at its
 * initial value (0x5a5a) and keep its own copy (a per-thread count that
 * goes on across the thread's calls). A thread created after the load is
 * checked too. The module encodes what it read into its output. */
#include <errno.h>
#include <iconv.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define OLD 6
#define ROUNDS 20

static pthread_barrier_t start, converted;

struct result {
  long bad;
  int first_magic; /* the module's TLS value as read on the first bad conversion */
};

/* One thread's conversions on one descriptor: byte, magic, running count. */
static void convert(struct result *r) {
  iconv_t cd = iconv_open("GOSHIMQUAD//", "GOSHIMTLS//");
  CHECK(cd != (iconv_t)-1, "iconv_open: %s", strerror(errno));
  unsigned expect = 0;
  for (int round = 0; round < ROUNDS; round++) {
    char in[] = "goroutine";
    unsigned char out[4 * sizeof in];
    char *ip = in, *op = (char *)out;
    size_t il = strlen(in), ol = sizeof out;
    CHECK(iconv(cd, &ip, &il, &op, &ol) != (size_t)-1, "iconv: %s", strerror(errno));
    CHECK_EQ(il, 0);
    CHECK_EQ(op - (char *)out, 4 * strlen(in));
    for (size_t i = 0; i < strlen(in); i++) {
      const unsigned char *q = out + 4 * i;
      int magic = q[1] | q[2] << 8;
      if (q[0] != (unsigned char)in[i] || magic != 0x5a5a || q[3] != (unsigned char)expect) {
        if (!r->bad) r->first_magic = magic;
        r->bad++;
      }
      expect++;
    }
  }
  CHECK_EQ(iconv_close(cd), 0);
}

static void *old_thread(void *a) {
  struct result *r = a;
  pthread_barrier_wait(&start); /* every thread exists before the first iconv_open */
  iconv_t keep = iconv_open("GOSHIMQUAD//", "GOSHIMTLS//");
  CHECK(keep != (iconv_t)-1, "iconv_open: %s", strerror(errno));
  convert(r);
  pthread_barrier_wait(&converted); /* the module stays loaded meanwhile */
  CHECK_EQ(iconv_close(keep), 0);
  return NULL;
}

static void *new_thread(void *a) {
  convert(a);
  return NULL;
}

int main(void) {
  char exe[PATH_MAX], so[PATH_MAX + 32], conf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0, "readlink");
  exe[n] = 0;
  snprintf(so, sizeof so, "%s/mod_gconv_tls.so", dirname(exe));
  CHECK(access(so, R_OK) == 0, "%s: %s", so, strerror(errno));
  char dir[] = "/tmp/iconv_tls.XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
  snprintf(conf, sizeof conf, "%s/gconv-modules", dir);
  FILE *f = fopen(conf, "w");
  CHECK(f != NULL, "%s: %s", conf, strerror(errno));
  fprintf(f, "module GOSHIMTLS// GOSHIMQUAD// %s 1\n", so);
  CHECK_EQ(fclose(f), 0);
  CHECK_EQ(setenv("GCONV_PATH", dir, 1), 0);

  pthread_barrier_init(&start, NULL, OLD);
  pthread_barrier_init(&converted, NULL, OLD);
  pthread_t t[OLD];
  struct result r[OLD + 1];
  memset(r, 0, sizeof r);
  for (int i = 0; i < OLD; i++) CHECK_EQ(pthread_create(&t[i], NULL, old_thread, &r[i]), 0);
  for (int i = 0; i < OLD; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  pthread_t late;
  CHECK_EQ(pthread_create(&late, NULL, new_thread, &r[OLD]), 0);
  CHECK_EQ(pthread_join(late, NULL), 0);

  unlink(conf);
  rmdir(dir);
  long bad = 0;
  for (int i = 0; i <= OLD; i++) {
    if (r[i].bad)
      fprintf(stderr, "thread %d: %ld wrong conversions, the module read its TLS as 0x%x\n", i,
              r[i].bad, r[i].first_magic);
    bad += r[i].bad;
  }
  CHECK(bad == 0, "%ld conversions saw the module's initial-exec TLS wrong", bad);
  printf("iconv_tls: %d threads, each with the module's initial-exec TLS\n", OLD + 1);
  return 0;
}
