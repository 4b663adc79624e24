// A SIGSEGV handler installed with SA_ONSTACK, on threads without an
// alternate signal stack: natively it runs on the faulting thread's own
// stack. NT threads each fault NFAULT times on a page of their own
// (PROT_NONE), while computing threads keep the processors busy (and get
// preempted): on even rounds the handler makes the page writable and
// returns (the faulting store is restarted through rt_sigreturn), on odd
// rounds it siglongjmps out of the handler. The handler checks si_addr and
// that its frame lies on its thread's stack. Results exact.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

#define NT 3
#define NSPIN 3
#define NFAULT 40

static __thread sigjmp_buf jb;
static __thread int longjmp_round;
static __thread char* page;
static __thread uintptr_t lo, hi;
static __thread int faults, bad_addr, bad_where;
static long pagesz;
static volatile int stop;
static volatile uint64_t sink;

static void on_segv(int sig, siginfo_t* si, void* uc) {
  (void)sig;
  (void)uc;
  char here;
  uintptr_t a = (uintptr_t)&here;
  if (a < lo || a >= hi) bad_where++;
  if ((char*)si->si_addr < page || (char*)si->si_addr >= page + pagesz) bad_addr++;
  faults++;
  if (longjmp_round) siglongjmp(jb, 1);
  mprotect(page, pagesz, PROT_READ | PROT_WRITE);
}

static void* faulter(void* arg) {
  int id = (int)(intptr_t)arg;
  self_stack(&lo, &hi);
  page = mmap(NULL, pagesz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(page != MAP_FAILED, "mmap");
  volatile int stored = 0, jumped = 0;  // (changed between sigsetjmp and siglongjmp)
  for (int r = 0; r < NFAULT; r++) {
    CHECK(mprotect(page, pagesz, PROT_NONE) == 0, "mprotect");
    longjmp_round = r & 1;
    if (sigsetjmp(jb, 1) == 0) {
      ((volatile char*)page)[r] = (char)(r + id);  // faults
      stored++;
      CHECK(page[r] == (char)(r + id), "the store after the handler");
    } else {
      jumped++;
    }
  }
  CHECK_EQ(faults, NFAULT);
  CHECK_EQ(stored, NFAULT / 2);
  CHECK_EQ(jumped, NFAULT / 2);
  CHECK_EQ(bad_addr, 0);
  CHECK_EQ(bad_where, 0);
  munmap(page, pagesz);
  return NULL;
}

static void* spinner(void* arg) {
  uint64_t x = (uint64_t)(intptr_t)arg;
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) x = x * 6364136223846793005ull + 1;
  sink = x;
  return NULL;
}

int main(void) {
  pagesz = sysconf(_SC_PAGESIZE);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction");
  pthread_t s[NSPIN], f[NT];
  for (int i = 0; i < NSPIN; i++) CHECK(pthread_create(&s[i], NULL, spinner, (void*)(intptr_t)(i + 1)) == 0, "create");
  for (int i = 0; i < NT; i++) CHECK(pthread_create(&f[i], NULL, faulter, (void*)(intptr_t)i) == 0, "create");
  for (int i = 0; i < NT; i++) pthread_join(f[i], NULL);
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < NSPIN; i++) pthread_join(s[i], NULL);
  printf("%d threads: %d faults each handled on their own stacks (half returned, half siglongjmp)\n", NT, NFAULT);
  return 0;
}
