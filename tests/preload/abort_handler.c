/* abort() with a SIGABRT handler: up to glibc 2.40 abort unblocks SIGABRT
 * in the calling thread and raises it, so the handler runs even when the
 * thread blocked SIGABRT (from 2.41 it does not: a thread that blocks
 * SIGABRT dies without its handler, which this test then expects); a handler that jumps out leaves abort (the mask siglongjmp
 * restores); one that returns is followed by the default action (the
 * process dies of SIGABRT), as is abort without a handler. Checked from the
 * main thread and from a second thread, with SIGABRT blocked and not, every
 * call after 20 threads ran and were joined; the dying cases in children
 * (no core file: RLIMIT_CORE 0).
 * (goshim before abort was interposed: glibc's abort unblocks and raises
 * with its internal sigprocmask and raise, which goshim does not see; with
 * SIGABRT blocked in the thread the handler never ran and the process died
 * of SIGABRT.) */
#include <errno.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

/* Whether the running glibc's abort unblocks SIGABRT first (<= 2.40). */
static int abort_unblocks(void) {
  int maj = 0, min = 0;
  CHECK_EQ(sscanf(gnu_get_libc_version(), "%d.%d", &maj, &min), 2);
  return maj < 2 || (maj == 2 && min <= 40);
}

static sigjmp_buf jb;
static volatile sig_atomic_t ran;
static int report_fd = -1;

static void on_abrt_jump(int s) {
  (void)s;
  ran++;
  siglongjmp(jb, 1);
}

/* The cleanup handler's pattern: report, back to the default action, and
   abort again from inside the handler (the process must die of SIGABRT;
   under goshim it once died of SIGSEGV at abort's last stage, or ran the
   program's SIGSEGV handler, review24 F1). */
static void on_segv_exit(int s) {
  (void)s;
  _exit(55);
}
static void on_abrt_dfl_abort(int s) {
  (void)s;
  if (report_fd >= 0) {
    char c = 'h';
    (void)!write(report_fd, &c, 1);
  }
  signal(SIGABRT, SIG_DFL);
  abort();
}

static void on_abrt_return(int s) {
  (void)s;
  ran++;
  if (report_fd >= 0) {
    char c = 'h';
    (void)!write(report_fd, &c, 1);
  }
}

static void *nothing(void *a) { return a; }

static void churn(void) {
  for (int i = 0; i < 20; i++) {
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, nothing, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
  }
}

static int abrt_blocked(void) {
  sigset_t cur;
  CHECK_EQ(pthread_sigmask(SIG_SETMASK, NULL, &cur), 0);
  return sigismember(&cur, SIGABRT);
}

static void set_blocked(int block) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGABRT);
  CHECK_EQ(pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &s, NULL), 0);
}

/* abort() whose handler jumps out: it ran once, and the mask is back. */
static void jump_out(int block, const char *who) {
  for (int r = 0; r < 10; r++) {
    churn();
    set_blocked(block);
    ran = 0;
    if (sigsetjmp(jb, 1) == 0) {
      abort();
      CHECK(0, "%s: abort returned", who);
    }
    CHECK(ran == 1, "%s, SIGABRT %s, round %d: handler ran %d times", who, block ? "blocked" : "open", r, (int)ran);
    CHECK(abrt_blocked() == block, "%s round %d: SIGABRT blocked %d after the jump", who, r, abrt_blocked());
  }
}

static void *second(void *arg) {
  jump_out(0, "second thread");
  if (abort_unblocks()) jump_out(1, "second thread");
  set_blocked(0);
  return arg;
}

/* A child that aborts from its main thread or a second one, with a handler
   that returns (handler 1), one that sets SIG_DFL and aborts again (2), or
   none (0), SIGABRT blocked or not: it must die of SIGABRT, after the
   handler ran once if there is one. */
static void *child_abort(void *arg) {
  churn();
  set_blocked((int)(long)arg);
  abort();
  return NULL;
}

static void dying(int handler, int block, int in_thread) {
  int p[2];
  CHECK_EQ(pipe(p), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    close(p[0]);
    report_fd = p[1];
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler == 2 ? on_abrt_dfl_abort : handler ? on_abrt_return : SIG_DFL;
    sigaction(SIGABRT, &sa, NULL);
    if (handler == 2) signal(SIGSEGV, on_segv_exit);
    if (in_thread) {
      pthread_t t;
      pthread_create(&t, NULL, child_abort, (void *)(long)block);
      pthread_join(t, NULL);
    } else {
      child_abort((void *)(long)block);
    }
    _exit(3); /* not reached */
  }
  close(p[1]);
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  char buf[16];
  ssize_t n = read(p[0], buf, sizeof buf);
  close(p[0]);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
        "handler %d, blocked %d, thread %d: child status 0x%x, expected death by SIGABRT", handler, block, in_thread, st);
  CHECK(n == (handler != 0 && (!block || abort_unblocks())), "handler %d, blocked %d, thread %d: the handler ran %zd times", handler, block, in_thread, n);
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_abrt_jump;
  CHECK_EQ(sigaction(SIGABRT, &sa, NULL), 0);
  jump_out(0, "main thread");
  if (abort_unblocks()) jump_out(1, "main thread");
  set_blocked(0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, second, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);

  for (int handler = 0; handler < 3; handler++)
    for (int block = 0; block < 2; block++)
      for (int in_thread = 0; in_thread < 2; in_thread++) dying(handler, block, in_thread);
  printf("abort: the handler runs (%s), jumps out or is followed by SIGABRT\n",
         abort_unblocks() ? "SIGABRT blocked or not" : "SIGABRT open; blocked: SIGABRT without it");
  return 0;
}
