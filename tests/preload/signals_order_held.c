// Process real-time signals reach the one thread that leaves them open in
// the kernel's order (lowest number first, each signal's instances in
// sending order), also when one of them was sent while that thread's
// handler blocked it.
//
// The main thread blocks SIGRTMIN+1 and SIGRTMIN+2; a worker leaves them
// open and computes (a leaf loop, no calls). Its handler for both blocks
// every signal (sa_mask full) and logs the instance it got. Each round:
//   1. sigqueue(SIGRTMIN+1, #1); the handler logs it and waits (read() on
//      a pipe);
//   2. sigqueue(SIGRTMIN+1, #2) while that handler runs (blocked there);
//   3. the main thread lets the handler end (a byte) and waits for its
//      last store;
//   4. sigqueue(SIGRTMIN+2, #3).
// #2 is pending on the only thread that may take it when #3 is sent (or
// taken already), and a thread dequeues the lowest pending signal first:
// the log must read #1, #2, #3 every round.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define NROUND 200

static int s1, s2;
static volatile int stop;
static int rel[2];  // the main thread ends handler #1 with a byte
static int ev[2];   // the handler tells the main thread where it is
static volatile int nlog;
static int log_sig[3 * NROUND + 8], log_val[3 * NROUND + 8];
static volatile uint64_t sink;
static volatile int bad_release;

static void note(char c) {
  if (write(ev[1], &c, 1) != 1) bad_release++;
}

static void handler(int sig, siginfo_t* si, void* uc) {
  (void)uc;
  int v = si->si_value.sival_int;
  // One handler at a time (sa_mask blocks every signal): logged, then
  // counted.
  int i = __atomic_load_n(&nlog, __ATOMIC_RELAXED);
  if (i < 3 * NROUND + 8) {
    log_sig[i] = sig;
    log_val[i] = v;
  }
  __atomic_store_n(&nlog, i + 1, __ATOMIC_RELEASE);
  int r = v / 10;
  if (v % 10 == 1) {
    note('E');
    unsigned char c = 0;
    ssize_t n;
    do n = read(rel[0], &c, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1 || c != (unsigned char)r) bad_release++;
    note('D');  // the handler's last step
  } else {
    note('L');
  }
}

static __attribute__((noinline)) uint64_t compute(uint64_t x) {
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

static void* worker(void* arg) {
  (void)arg;
  sink = compute(1);
  return NULL;
}

static void send(int sig, int v) {
  union sigval sv;
  sv.sival_int = v;
  CHECK(sigqueue(getpid(), sig, sv) == 0, "sigqueue %d", v);
}

static void wait_note(char want) {
  char c = 0;
  ssize_t n;
  do n = read(ev[0], &c, 1);
  while (n < 0 && errno == EINTR);
  CHECK(n == 1 && c == want, "expected note %c, got %c", want, n == 1 ? c : '?');
}

int main(void) {
  s1 = SIGRTMIN + 1;
  s2 = SIGRTMIN + 2;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO;
  sigfillset(&sa.sa_mask);
  CHECK(sigaction(s1, &sa, NULL) == 0, "sigaction");
  CHECK(sigaction(s2, &sa, NULL) == 0, "sigaction");
  CHECK(pipe(rel) == 0 && pipe(ev) == 0, "pipe");
  pthread_t t;
  CHECK(pthread_create(&t, NULL, worker, NULL) == 0, "create");
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, s1);
  sigaddset(&m, s2);
  CHECK(pthread_sigmask(SIG_BLOCK, &m, NULL) == 0, "block");
  for (int r = 1; r <= NROUND; r++) {
    send(s1, r * 10 + 1);
    wait_note('E');
    send(s1, r * 10 + 2);
    unsigned char c = (unsigned char)r;
    CHECK(write(rel[1], &c, 1) == 1, "write");
    wait_note('D');
    send(s2, r * 10 + 3);
    wait_note('L');
    wait_note('L');
    CHECK_EQ(__atomic_load_n(&nlog, __ATOMIC_ACQUIRE), 3 * r);
    for (int k = 0; k < 3; k++) {
      int i = 3 * (r - 1) + k;
      int want_sig = k < 2 ? s1 : s2, want_val = r * 10 + k + 1;
      CHECK(log_sig[i] == want_sig && log_val[i] == want_val,
            "round %d: handler %d ran SIGRTMIN+%d #%d, expected SIGRTMIN+%d #%d", r, k + 1,
            log_sig[i] - SIGRTMIN, log_val[i] % 10, want_sig - SIGRTMIN, want_val % 10);
    }
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  CHECK(bad_release == 0, "handler #1 read %d wrong bytes", bad_release);
  printf("%d rounds: SIGRTMIN+1 #1, #2 (sent while #1's handler blocked it), SIGRTMIN+2 #3, in order\n",
         NROUND);
  return 0;
}
