/* A thread whose deferred cancellation is pending turns the allocator's
 * background threads off through mallctl (jemalloc's control call, when the
 * process's malloc is jemalloc: the program then finds it with dlsym):
 * that joins the allocator's background thread while jemalloc holds its
 * control locks. The join must not act on the thread's cancellation (the
 * thread would unwind with the allocator's locks held, and every later
 * mallctl, and the next background thread's creation, would wait for
 * ever): mallctl completes, the thread is canceled at its next cancellation
 * point (pthread_testcancel), and another thread can then use mallctl and
 * malloc. Without jemalloc (glibc's malloc) only the cancellation itself is
 * checked. A step that takes over 20 s fails instead of hanging. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
static mallctl_fn mallctl_p;
static int gate[2];
static volatile int ready, noted, ctl_ret = -1;

static void note(void *a) {
  (void)a;
  noted = 1;
}

static void *victim(void *a) {
  (void)a;
  char c;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
  __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
  CHECK_EQ(read(gate[0], &c, 1), 1);
  pthread_cleanup_push(note, NULL);
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
  if (mallctl_p) {
    bool off = false;
    ctl_ret = mallctl_p("background_thread", NULL, NULL, &off, sizeof off);
  }
  pthread_testcancel();
  pthread_cleanup_pop(0);
  return NULL;
}

/* Afterwards, on a fresh thread: the background threads are off, can be
 * turned on and off again, and malloc works. */
static volatile int after_done;
static void *after(void *a) {
  (void)a;
  bool bg = true, on = true, off = false;
  size_t len = sizeof bg;
  CHECK_EQ(mallctl_p("background_thread", &bg, &len, NULL, 0), 0);
  CHECK(!bg, "the background threads are still on");
  CHECK_EQ(mallctl_p("background_thread", NULL, NULL, &on, sizeof on), 0);
  void *p[64];
  for (int i = 0; i < 64; i++) CHECK((p[i] = malloc(1000 + i * 4096)) != NULL, "malloc");
  for (int i = 0; i < 64; i++) free(p[i]);
  CHECK_EQ(mallctl_p("background_thread", NULL, NULL, &off, sizeof off), 0);
  after_done = 1;
  return NULL;
}

static int join_within(pthread_t t, void **r, int secs) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += secs;
  return pthread_timedjoin_np(t, r, &dl);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  CHECK_EQ(pipe(gate), 0);
  mallctl_p = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  bool bg = false, on = true;
  size_t len = sizeof bg;
  if (mallctl_p && mallctl_p("background_thread", &bg, &len, NULL, 0) != 0) mallctl_p = NULL;
  if (mallctl_p) {
    /* Background threads on: thread 0 is created now (a kernel thread). */
    int e = mallctl_p("background_thread", NULL, NULL, &on, sizeof on);
    CHECK(e == 0, "mallctl(background_thread = true): %d", e);
    void *p = malloc(100000);
    free(p);
    printf("jemalloc: background threads on\n");
  } else {
    printf("no jemalloc: cancellation only\n");
  }
  for (int round = 0; round < env_int("REPS", 1); round++) {
    if (mallctl_p && round > 0)
      CHECK_EQ(mallctl_p("background_thread", NULL, NULL, &on, sizeof on), 0);
    ready = noted = 0;
    ctl_ret = -1;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, victim, NULL), 0);
    wait_flag(&ready);
    CHECK_EQ(pthread_cancel(t), 0);
    CHECK_EQ(write(gate[1], "g", 1), 1);
    void *r;
    int e = join_within(t, &r, 20);
    CHECK(e == 0, "the canceled thread did not end: %d", e);
    CHECK(r == PTHREAD_CANCELED, "the thread returned %p", r);
    CHECK(noted, "no cleanup handler ran");
    if (mallctl_p) {
      CHECK(ctl_ret == 0, "mallctl(background_thread = false) did not complete: %d", ctl_ret);
      after_done = 0;
      CHECK_EQ(pthread_create(&t, NULL, after, NULL), 0);
      e = join_within(t, NULL, 20);
      CHECK(e == 0 && after_done, "mallctl or malloc waited for ever after the cancellation (%d)", e);
    }
  }
  printf("canceled after its mallctl; the allocator works\n");
  return 0;
}
