/* Signal handlers that leave by siglongjmp, longjmp or _longjmp instead of
 * returning: the thread is back in its ordinary code, and everything must be
 * as after a handler that returned:
 *   1. without a handler, siglongjmp restores the mask sigsetjmp saved (a
 *      signal the thread blocked in between is open again, and one it
 *      opened is blocked again); a thread raises SIGUSR1 1,000 times, each handler run leaving by
 *      siglongjmp (the mask restored by sigsetjmp's savemask); then by
 *      longjmp and _longjmp (the handler's mask stays: the program unblocks
 *      the signal itself, as natively);
 *   2. SIGSEGV recovery: 200 faults on an unmapped page, each handler run
 *      leaving by siglongjmp;
 *   3. a nested handler (SIGUSR2 raised inside SIGUSR1's handler) that
 *      siglongjmps into the outer handler, which then returns normally;
 *   4. a handler on an alternate signal stack (SA_ONSTACK) that siglongjmps
 *      back to the thread's own stack;
 *   5. after all of that, in each of those threads: a signal sent by another
 *      thread is still delivered (its handler runs), and the thread, spinning
 *      without a single call until another thread sets a flag, does not keep
 *      that other thread from running (the spinner waits for a flag only the
 *      other thread sets: it must be preempted when there is one processor).
 * Every count is checked; the output is fixed. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common.h"

enum { kRaises = 1000, kFaults = 200, kNested = 100, kAlt = 100 };

static sigjmp_buf env;
static jmp_buf plain_env;
static sigjmp_buf inner_env;
static volatile sig_atomic_t usr1_runs, usr2_runs, segv_runs, alt_runs, late_runs;
static volatile sig_atomic_t mode; /* 0 siglongjmp, 1 longjmp, 2 _longjmp, 3 nested, 4 alt, 5 return */
static char *bad_page;

static void on_usr1(int sig) {
  (void)sig;
  usr1_runs++;
  switch (mode) {
    case 0: siglongjmp(env, 1);
    case 1: longjmp(plain_env, 1);
    case 2: _longjmp(plain_env, 1);
    case 3:
      /* nested: SIGUSR2's handler jumps back here, then this handler returns */
      if (sigsetjmp(inner_env, 1) == 0) {
        raise(SIGUSR2);
        CHECK(0, "SIGUSR2's handler returned instead of jumping");
      }
      return;
    case 4: siglongjmp(env, 1);
    default: return;
  }
}

static void on_usr2(int sig) {
  (void)sig;
  usr2_runs++;
  siglongjmp(inner_env, 1);
}

static void on_segv(int sig) {
  (void)sig;
  segv_runs++;
  siglongjmp(env, 1);
}

static void on_late(int sig) {
  (void)sig;
  late_runs++;
}

static void install(int sig, void (*h)(int), int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = h;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(sig, &sa, NULL), 0);
}

static void unblock(int sig) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, sig);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s, NULL), 0);
}

static void block(int sig) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, sig);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
}

static int is_blocked(int sig) {
  sigset_t s;
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &s), 0);
  return sigismember(&s, sig);
}

/* The part that runs in a thread of its own (so every part's thread is
 * checked for late delivery and preemption afterwards). */
static void run_part(int part) {
  switch (part) {
    case 1: {
      /* without a handler: siglongjmp restores the mask sigsetjmp saved,
       * whatever the thread changed in between */
      mode = 5;
      usr1_runs = 0;
      unblock(SIGUSR1);
      if (sigsetjmp(env, 1) == 0) {
        block(SIGUSR1);
        siglongjmp(env, 1);
      }
      CHECK(!is_blocked(SIGUSR1), "siglongjmp did not unblock what sigsetjmp saved open");
      raise(SIGUSR1);
      CHECK_EQ(usr1_runs, 1);
      block(SIGUSR1);
      if (sigsetjmp(env, 1) == 0) {
        unblock(SIGUSR1);
        siglongjmp(env, 1);
      }
      CHECK(is_blocked(SIGUSR1), "siglongjmp did not block what sigsetjmp saved blocked");
      raise(SIGUSR1);
      CHECK_EQ(usr1_runs, 1);
      sigset_t pend;
      CHECK_EQ(sigpending(&pend), 0);
      CHECK(sigismember(&pend, SIGUSR1), "SIGUSR1 not pending while blocked");
      unblock(SIGUSR1); /* delivered here */
      CHECK_EQ(usr1_runs, 2);
      printf("part 1: siglongjmp restored the saved mask both ways\n");
      mode = 0;
      usr1_runs = 0;
      for (volatile int i = 0; i < kRaises; i++) {
        if (sigsetjmp(env, 1) == 0) {
          raise(SIGUSR1);
          CHECK(0, "SIGUSR1's handler returned instead of jumping");
        }
        CHECK(!is_blocked(SIGUSR1), "siglongjmp did not restore the mask");
      }
      CHECK_EQ(usr1_runs, kRaises);
      for (int m = 1; m <= 2; m++) {
        mode = m;
        usr1_runs = 0;
        for (volatile int i = 0; i < kRaises; i++) {
          if (setjmp(plain_env) == 0) {
            raise(SIGUSR1);
            CHECK(0, "SIGUSR1's handler returned instead of jumping");
          }
          /* glibc's longjmp and _longjmp leave the mask alone: the handler's
           * mask (SIGUSR1 blocked) stays */
          CHECK(is_blocked(SIGUSR1), "mode %d: SIGUSR1 not blocked after the jump", m);
          unblock(SIGUSR1);
        }
        CHECK_EQ(usr1_runs, kRaises);
      }
      printf("part 1: %d handler runs left by siglongjmp, longjmp and _longjmp each\n", kRaises);
      break;
    }
    case 2: {
      segv_runs = 0;
      for (volatile int i = 0; i < kFaults; i++) {
        if (sigsetjmp(env, 1) == 0) {
          *(volatile char *)bad_page = 1;
          CHECK(0, "the write to an unmapped page did not fault");
        }
      }
      CHECK_EQ(segv_runs, kFaults);
      printf("part 2: %d faults recovered by siglongjmp\n", kFaults);
      break;
    }
    case 3: {
      mode = 3;
      usr1_runs = usr2_runs = 0;
      for (int i = 0; i < kNested; i++) raise(SIGUSR1);
      CHECK_EQ(usr1_runs, kNested);
      CHECK_EQ(usr2_runs, kNested);
      CHECK(!is_blocked(SIGUSR1) && !is_blocked(SIGUSR2), "a mask left behind");
      printf("part 3: %d nested handlers left by siglongjmp into the outer one\n", kNested);
      break;
    }
    case 4: {
      stack_t ss;
      memset(&ss, 0, sizeof ss);
      ss.ss_size = 64 * 1024;
      ss.ss_sp = malloc(ss.ss_size);
      CHECK(ss.ss_sp != NULL, "malloc");
      CHECK_EQ(sigaltstack(&ss, NULL), 0);
      install(SIGUSR1, on_usr1, SA_ONSTACK);
      mode = 4;
      usr1_runs = 0;
      for (volatile int i = 0; i < kAlt; i++) {
        if (sigsetjmp(env, 1) == 0) {
          raise(SIGUSR1);
          CHECK(0, "SIGUSR1's handler returned instead of jumping");
        }
        stack_t cur;
        CHECK_EQ(sigaltstack(NULL, &cur), 0);
        CHECK(!(cur.ss_flags & SS_ONSTACK), "still on the alternate stack after the jump");
      }
      CHECK_EQ(usr1_runs, kAlt);
      install(SIGUSR1, on_usr1, 0);
      stack_t off;
      memset(&off, 0, sizeof off);
      off.ss_flags = SS_DISABLE;
      CHECK_EQ(sigaltstack(&off, NULL), 0);
      free(ss.ss_sp);
      printf("part 4: %d handler runs on the alternate stack left by siglongjmp\n", kAlt);
      break;
    }
  }
}

struct part_arg {
  int part;
  atomic_int ready;     /* the part is done: the thread waits for SIGWINCH */
  atomic_int go_spin;   /* the main thread saw the late handler run */
  atomic_int released;  /* set by the releaser thread while the part spins */
};

static void *part_thread(void *p) {
  struct part_arg *a = p;
  run_part(a->part);
  atomic_store(&a->ready, 1);
  /* 5a: a signal sent by another thread to this one is delivered. */
  while (late_runs == 0) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL); /* a call that can be interrupted; loops until it ran */
  }
  /* 5b: spin without a call until another thread releases this one. */
  atomic_store(&a->go_spin, 1);
  while (!atomic_load_explicit(&a->released, memory_order_relaxed)) {
  }
  return NULL;
}

static void *releaser(void *p) {
  struct part_arg *a = p;
  while (!atomic_load(&a->go_spin)) sched_yield();
  atomic_store(&a->released, 1);
  return NULL;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  bad_page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(bad_page != MAP_FAILED, "mmap");
  install(SIGUSR1, on_usr1, 0);
  install(SIGUSR2, on_usr2, 0);
  install(SIGSEGV, on_segv, SA_NODEFER);
  install(SIGWINCH, on_late, 0);
  for (int part = 1; part <= 4; part++) {
    struct part_arg a;
    memset(&a, 0, sizeof a);
    a.part = part;
    late_runs = 0;
    pthread_t t, r;
    CHECK_EQ(pthread_create(&t, NULL, part_thread, &a), 0);
    while (!atomic_load(&a.ready)) sched_yield();
    CHECK_EQ(pthread_kill(t, SIGWINCH), 0);
    CHECK_EQ(pthread_create(&r, NULL, releaser, &a), 0);
    CHECK_EQ(pthread_join(r, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(late_runs, 1);
    printf("part %d: a later signal from another thread was delivered, and the thread was preempted\n", part);
  }
  printf("done\n");
  return 0;
}
