/* Signal system calls made through libc's syscall(), as programs without a
 * glibc wrapper (or that bypass it) make them, from main and from a second
 * thread, each round after other threads ran (the caller has then usually
 * moved to another kernel thread under M:N):
 *  - SYS_kill, SYS_rt_sigqueueinfo, SYS_tgkill/SYS_tkill (own gettid()),
 *    SYS_rt_tgsigqueueinfo, SYS_pidfd_send_signal to the caller itself:
 *    the handler ran before the call returned (POSIX for kill; the kernel's
 *    thread-directed delivery for the others), 200 rounds;
 *  - SYS_rt_sigprocmask blocks a signal for the calling thread only (its
 *    pthread_sigmask old set shows it, main's does not; a signal sent to
 *    it stays pending, SYS_rt_sigpending shows it, and the unblocking call
 *    delivers it before returning); a sigsetsize other than 8 is EINVAL;
 *  - SYS_rt_sigaction installs a handler (struct kernel_sigaction) that
 *    runs, that sigaction() reports, and reads back what sigaction() set;
 *  - SYS_rt_sigtimedwait takes a blocked pending signal, SYS_rt_sigsuspend
 *    runs its handler (EINTR, the mask back); SYS_sigaltstack;
 *  - tgkill() (glibc >= 2.30) of the own gettid() with the signal blocked:
 *    pending on the thread until it unblocks it, across other threads' runs.
 * Failures are counted per class and reported together.
 * (goshim before: the numbers went to the kernel under goshim's feet.) */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define ROUNDS 200
#define NTHREADS 4

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* The kernel's struct sigaction for rt_sigaction (not glibc's). */
struct ksigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)(void);
  uint64_t mask;
};
#define KSA_RESTORER 0x04000000UL

#ifdef __x86_64__
/* x86_64's kernel needs a restorer (rt_sigreturn) for a handler. */
void test_restore_rt(void);
__asm__(".text\n.type test_restore_rt,@function\ntest_restore_rt:\n\tmovq $15, %rax\n\tsyscall\n\thlt\n");
#define RESTORER_FLAGS KSA_RESTORER
#define RESTORER test_restore_rt
#else
#define RESTORER_FLAGS 0UL
#define RESTORER NULL
#endif

static volatile sig_atomic_t got, code, value;
static volatile int raw_hits;
static int fails[9];
static const char *fail_names[9] = {"kill", "rt_sigqueueinfo", "tgkill", "tkill", "rt_tgsigqueueinfo",
                                    "pidfd_send_signal", "mask", "action", "tgkill_blocked"};

static void on_sig(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  got = sig;
  code = si->si_code;
  value = si->si_code == SI_QUEUE ? si->si_value.sival_int : -1;
}

static void on_raw(int sig) {
  (void)sig;
  raw_hits++;
}

static volatile long work_sink;

static void *worker(void *arg) {
  for (int i = 0; i < 1000; i++) work_sink += i;
  return arg;
}

static void threads_round(void) {
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) CHECK_EQ(pthread_create(&t[i], NULL, worker, NULL), 0);
  for (int i = 0; i < NTHREADS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
}

static void fill_info(siginfo_t *si, int sig, int v) {
  memset(si, 0, sizeof *si);
  si->si_signo = sig;
  si->si_code = SI_QUEUE;
  si->si_pid = getpid();
  si->si_uid = getuid();
  si->si_value.sival_int = v;
}

#define EXPECT(cls, cond)          \
  do {                             \
    if (!(cond)) fails[cls]++;     \
  } while (0)

static void send_rounds(int pidfd) {
  int rt = SIGRTMIN + 3;
  for (int r = 0; r < ROUNDS; r++) {
    if (r % 4 == 0) threads_round();
    got = 0;
    CHECK_EQ(syscall(SYS_kill, getpid(), SIGUSR1), 0);
    EXPECT(0, got == SIGUSR1 && code == SI_USER);

    siginfo_t si;
    fill_info(&si, rt, r);
    got = 0;
    CHECK_EQ(syscall(SYS_rt_sigqueueinfo, getpid(), rt, &si), 0);
    EXPECT(1, got == rt && code == SI_QUEUE && value == r);

    got = 0;
    CHECK_EQ(syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR1), 0);
    EXPECT(2, got == SIGUSR1);

    got = 0;
    CHECK_EQ(syscall(SYS_tkill, syscall(SYS_gettid), SIGUSR1), 0);
    EXPECT(3, got == SIGUSR1);

    fill_info(&si, rt, r + 1000);
    got = 0;
    CHECK_EQ(syscall(SYS_rt_tgsigqueueinfo, getpid(), syscall(SYS_gettid), rt, &si), 0);
    EXPECT(4, got == rt && value == r + 1000);

    if (pidfd >= 0) {
      got = 0;
      CHECK_EQ(syscall(SYS_pidfd_send_signal, pidfd, SIGUSR1, NULL, 0), 0);
      EXPECT(5, got == SIGUSR1);
    }
  }
}

static int g_pidfd = -1;

static sigset_t sent_set;

/* main blocks the signals meanwhile: it is then no thread that could take
 * them instead of the caller. */
static void *sender(void *arg) {
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &sent_set, NULL), 0);
  send_rounds(g_pidfd);
  return arg;
}

static int blocked_in(const sigset_t *s, int sig) { return sigismember(s, sig) == 1; }

static pthread_barrier_t mbar;
static volatile sig_atomic_t usr2_hits;
static void on_usr2(int sig) {
  (void)sig;
  usr2_hits++;
}

/* The mask class, on a second thread (main keeps SIGUSR2 open). */
static void *masker(void *arg) {
  (void)arg;
  for (int r = 0; r < 20; r++) {
    threads_round();
    uint64_t set = 1ull << (SIGUSR2 - 1), old = ~0ull;
    EXPECT(6, syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, 8) == 0);
    EXPECT(6, !(old & set));
    sigset_t cur;
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &cur), 0);
    EXPECT(6, blocked_in(&cur, SIGUSR2));
    usr2_hits = 0;
    CHECK_EQ(pthread_kill(pthread_self(), SIGUSR2), 0);
    EXPECT(6, usr2_hits == 0);
    uint64_t pend = 0;
    EXPECT(6, syscall(SYS_rt_sigpending, &pend, 8) == 0);
    EXPECT(6, (pend & set) != 0);
    sigset_t ps;
    CHECK_EQ(sigpending(&ps), 0);
    EXPECT(6, blocked_in(&ps, SIGUSR2));
    EXPECT(6, syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &set, &old, 8) == 0);
    EXPECT(6, (old & set) != 0);
    EXPECT(6, usr2_hits == 1);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &cur), 0);
    EXPECT(6, !blocked_in(&cur, SIGUSR2));
    errno = 0;
    EXPECT(6, syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, NULL, 4) == -1 && errno == EINVAL);

    /* rt_sigtimedwait takes a blocked pending signal. */
    EXPECT(6, syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, NULL, 8) == 0);
    CHECK_EQ(pthread_kill(pthread_self(), SIGUSR2), 0);
    struct timespec ts = {1, 0};
    siginfo_t si;
    EXPECT(6, syscall(SYS_rt_sigtimedwait, &set, &si, &ts, 8) == SIGUSR2);
    /* rt_sigsuspend: a pending blocked signal runs its handler inside,
     * EINTR, and the mask is back (still blocked). */
    CHECK_EQ(pthread_kill(pthread_self(), SIGUSR2), 0);
    EXPECT(6, usr2_hits == 1);
    uint64_t none = 0;
    errno = 0;
    EXPECT(6, syscall(SYS_rt_sigsuspend, &none, 8) == -1 && errno == EINTR);
    EXPECT(6, usr2_hits == 2);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &cur), 0);
    EXPECT(6, blocked_in(&cur, SIGUSR2));
    EXPECT(6, syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &set, NULL, 8) == 0);
    EXPECT(6, usr2_hits == 2);

    /* A blocked signal sent to the own thread (tgkill of its gettid())
     * stays pending on it, also across other threads' runs (a move to
     * another kernel thread under M:N), until it unblocks it. */
    sigset_t s2;
    sigemptyset(&s2);
    sigaddset(&s2, SIGUSR2);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s2, NULL), 0);
    usr2_hits = 0;
    CHECK_EQ(tgkill(getpid(), gettid(), SIGUSR2), 0);
    threads_round();
    EXPECT(8, usr2_hits == 0);
    CHECK_EQ(sigpending(&ps), 0);
    EXPECT(8, blocked_in(&ps, SIGUSR2));
    CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &s2, NULL), 0);
    EXPECT(8, usr2_hits == 1);
  }
  pthread_barrier_wait(&mbar);  /* main checks its own mask now */
  pthread_barrier_wait(&mbar);
  return NULL;
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sig;
  sa.sa_flags = SA_SIGINFO;
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ(sigaction(SIGRTMIN + 3, &sa, NULL), 0);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr2;
  CHECK_EQ(sigaction(SIGUSR2, &sa, NULL), 0);

  g_pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);  /* -1 before Linux 5.3: skipped */

  send_rounds(g_pidfd);
  pthread_t t;
  sigemptyset(&sent_set);
  sigaddset(&sent_set, SIGUSR1);
  sigaddset(&sent_set, SIGRTMIN + 3);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &sent_set, NULL), 0);
  CHECK_EQ(pthread_create(&t, NULL, sender, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &sent_set, NULL), 0);

  CHECK_EQ(pthread_barrier_init(&mbar, NULL, 2), 0);
  CHECK_EQ(pthread_create(&t, NULL, masker, NULL), 0);
  pthread_barrier_wait(&mbar);
  sigset_t cur;
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &cur), 0);
  EXPECT(6, !blocked_in(&cur, SIGUSR2));
  pthread_barrier_wait(&mbar);
  CHECK_EQ(pthread_join(t, NULL), 0);

  /* rt_sigaction: read back what sigaction() set, install a handler. */
  struct ksigaction k, ko;
  memset(&ko, 0, sizeof ko);
  EXPECT(7, syscall(SYS_rt_sigaction, SIGUSR2, NULL, &ko, 8) == 0);
  EXPECT(7, ko.handler == on_usr2);
  memset(&k, 0, sizeof k);
  k.handler = on_raw;
  k.flags = SA_RESTART | RESTORER_FLAGS;
  k.restorer = RESTORER;
  k.mask = 1ull << (SIGUSR1 - 1);
  errno = 0;
  EXPECT(7, syscall(SYS_rt_sigaction, SIGUSR2, &k, NULL, 4) == -1 && errno == EINVAL);
  errno = 0;
  EXPECT(7, syscall(SYS_rt_sigaction, SIGKILL, &k, NULL, 8) == -1 && errno == EINVAL);
  EXPECT(7, syscall(SYS_rt_sigaction, SIGUSR2, &k, &ko, 8) == 0);
  EXPECT(7, ko.handler == on_usr2);
  memset(&sa, 0, sizeof sa);
  CHECK_EQ(sigaction(SIGUSR2, NULL, &sa), 0);
  EXPECT(7, sa.sa_handler == on_raw && (sa.sa_flags & SA_RESTART) && sigismember(&sa.sa_mask, SIGUSR1) == 1);
  for (int r = 0; r < 20; r++) {
    if (r % 4 == 0) threads_round();
    int before = raw_hits;
    raise(SIGUSR2);
    EXPECT(7, raw_hits == before + 1);
    before = raw_hits;
    syscall(SYS_kill, getpid(), SIGUSR2);
    EXPECT(7, raw_hits == before + 1);
  }

  /* sigaltstack through syscall(): what sigaltstack() then reports. */
  static char alt[1 << 16];
  stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0}, os;
  EXPECT(7, syscall(SYS_sigaltstack, &ss, NULL) == 0);
  CHECK_EQ(sigaltstack(NULL, &os), 0);
  EXPECT(7, os.ss_sp == alt && os.ss_size == sizeof alt);

  int total = 0;
  for (int i = 0; i < 9; i++) {
    if (fails[i]) fprintf(stderr, "FAIL %s: %d\n", fail_names[i], fails[i]);
    total += fails[i];
  }
  if (total) return 1;
  printf("raw signal system calls as natively: %d rounds from main and a thread\n", ROUNDS);
  return 0;
}
