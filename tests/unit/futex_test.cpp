// core/futex (syscall(SYS_futex) served in-process) and core/memclass (the
// private/shared decision for non-private operations), with kernel-thread
// callers (the foreign path).
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <atomic>

#include "core/futex.hpp"
#include "core/memclass.hpp"
#include "core/sema.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

TestSuite(futex, .timeout = 60);

namespace {
struct Waiter {
  uint32_t* word;
  int op;
  uint32_t val;
  uint32_t bitset;
  long result = -99;
};

void* wait_fn(void* p) {
  Waiter* w = (Waiter*)p;
  w->result = futex_syscall(w->word, w->op, w->val, nullptr, nullptr, w->bitset);
  return nullptr;
}

void wait_queued(const void* addr, int n) {
  while (sema_nwaiters(addr) < n) sched_yield();
}
}  // namespace

Test(futex, private_wait_wake_counts) {
  static uint32_t w = 0;
  pthread_t t[3];
  Waiter ws[3];
  for (int i = 0; i < 3; i++) {
    ws[i] = Waiter{&w, FUTEX_WAIT_PRIVATE, 0, 0};
    pthread_create(&t[i], nullptr, wait_fn, &ws[i]);
  }
  wait_queued(&w, 3);
  cr_assert_eq(futex_syscall(&w, FUTEX_WAKE_PRIVATE, 0, nullptr, nullptr, 0), 1,
               "nr_wake 0 wakes one, as the kernel does");
  cr_assert_eq(futex_syscall(&w, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0), 2);
  for (int i = 0; i < 3; i++) {
    pthread_join(t[i], nullptr);
    cr_assert_eq(ws[i].result, 0);
  }
}

Test(futex, errors) {
  static uint32_t w = 1;
  struct timespec zero = {0, 0}, neg = {-1, 0};
  cr_assert_eq(futex_syscall(&w, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0), -EAGAIN);
  cr_assert_eq(futex_syscall(&w, FUTEX_WAIT_PRIVATE, 1, &zero, nullptr, 0), -ETIMEDOUT);
  cr_assert_eq(futex_syscall(&w, FUTEX_WAIT_PRIVATE, 1, &neg, nullptr, 0), -EINVAL);
  cr_assert_eq(futex_syscall(&w, FUTEX_WAIT_BITSET_PRIVATE, 1, nullptr, nullptr, 0), -EINVAL);
  cr_assert_eq(futex_syscall(&w, FUTEX_WAKE_PRIVATE | FUTEX_CLOCK_REALTIME, 1, nullptr, nullptr, 0),
               -ENOSYS);
  cr_assert_eq(futex_syscall(&w, FUTEX_WAIT_PRIVATE | FUTEX_CLOCK_REALTIME, 1, &zero, nullptr, 0),
               -ENOSYS);
  cr_assert_eq(futex_syscall((uint32_t*)((char*)&w + 2), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0),
               -EINVAL);
  cr_assert_eq(futex_syscall(nullptr, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0), -EFAULT);
  cr_assert_eq(futex_syscall(&w, FUTEX_CMP_REQUEUE_PRIVATE, 1, (const timespec*)1L, &w, 0),
               -EAGAIN);
  cr_assert_eq(futex_syscall(&w, FUTEX_WAKE_OP_PRIVATE, 1, nullptr, &w, 7u << 28), -ENOSYS);
}

Test(futex, wake_op_and_requeue) {
  static uint32_t a = 0, b = 0;
  pthread_t t[4];
  Waiter ws[4];
  for (int i = 0; i < 4; i++) {
    ws[i] = Waiter{i < 2 ? &a : &b, FUTEX_WAIT_PRIVATE, 0, 0};
    pthread_create(&t[i], nullptr, wait_fn, &ws[i]);
  }
  wait_queued(&a, 2);
  wait_queued(&b, 2);
  // b = 5 (old 0); wake 1 on a; old == 0 so wake up to 8 on b.
  long r = futex_syscall(&a, FUTEX_WAKE_OP_PRIVATE, 1, (const timespec*)8L, &b,
                         FUTEX_OP(FUTEX_OP_SET, 5, FUTEX_OP_CMP_EQ, 0));
  cr_assert_eq(r, 3);
  cr_assert_eq(b, 5u);
  cr_assert_eq(sema_nwaiters(&a), 1);
  // requeue the last waiter of a onto b, then wake b
  cr_assert_eq(futex_syscall(&a, FUTEX_CMP_REQUEUE_PRIVATE, 0, (const timespec*)1L, &b, 0), 1);
  cr_assert_eq(futex_syscall(&b, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0), 1);
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], nullptr);
    cr_assert_eq(ws[i].result, 0);
  }
}

Test(futex, bitsets) {
  static uint32_t w = 0;
  pthread_t t[2];
  Waiter ws[2] = {{&w, FUTEX_WAIT_BITSET_PRIVATE, 0, 1}, {&w, FUTEX_WAIT_BITSET_PRIVATE, 0, 2}};
  for (int i = 0; i < 2; i++) pthread_create(&t[i], nullptr, wait_fn, &ws[i]);
  wait_queued(&w, 2);
  cr_assert_eq(futex_syscall(&w, FUTEX_WAKE_BITSET_PRIVATE, 8, nullptr, nullptr, 4), 0);
  cr_assert_eq(futex_syscall(&w, FUTEX_WAKE_BITSET_PRIVATE, 8, nullptr, nullptr, 2), 1);
  pthread_join(t[1], nullptr);
  cr_assert_eq(futex_syscall(&w, FUTEX_WAKE_PRIVATE, 8, nullptr, nullptr, 0), 1);
  pthread_join(t[0], nullptr);
}

// Non-private operations: in-process on private memory (the waiter is in
// goshim's queue), the kernel's futex on MAP_SHARED memory.
Test(futex, nonprivate_routing) {
  uint32_t* heap = (uint32_t*)malloc(64);
  *heap = 0;
  cr_assert(!memclass_shared(heap), "malloc'd memory is private");
  uint32_t* shm = (uint32_t*)mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  memclass_mapping_changed();
  *shm = 0;
  cr_assert(memclass_shared(shm), "MAP_SHARED memory is shared");
  int stackword = 0;
  cr_assert(!memclass_shared(&stackword), "a stack is private");

  pthread_t t;
  Waiter w{heap, FUTEX_WAIT, 0, 0};
  pthread_create(&t, nullptr, wait_fn, &w);
  wait_queued(heap, 1);  // parked in-process: sema sees it
  cr_assert_eq(futex_syscall(heap, FUTEX_WAKE, 1, nullptr, nullptr, 0), 1);
  pthread_join(t, nullptr);
  cr_assert_eq(w.result, 0);

  Waiter ws{shm, FUTEX_WAIT, 0, 0};
  pthread_create(&t, nullptr, wait_fn, &ws);
  long woken = 0;
  while (woken == 0) {  // it waits in the kernel: sema never sees it
    cr_assert_eq(sema_nwaiters(shm), 0);
    woken = futex_syscall(shm, FUTEX_WAKE, 1, nullptr, nullptr, 0);
    if (!woken) sched_yield();
  }
  pthread_join(t, nullptr);
  cr_assert_eq(ws.result, 0);
  munmap(shm, 4096);
  free(heap);
}

// A private answer is never stale: replacing a private mapping by a shared
// one at the same address is seen once a mapping change is reported.
Test(futex, memclass_follows_remap) {
  void* p = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(!memclass_shared(p));
  void* q = mmap(p, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  cr_assert_eq(q, p);
  memclass_mapping_changed();  // what goshim's mmap does after a shared mapping
  cr_assert(memclass_shared(p));
  munmap(p, 8192);
}

// The same answers from the /proc/self/maps scan (kernels before 6.11).
Test(futex, memclass_scan_fallback) {
  memclass_use_scan(true);
  uint32_t* heap = (uint32_t*)malloc(64);
  uint32_t* shm = (uint32_t*)mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  uint32_t* priv = (uint32_t*)mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memclass_mapping_changed();
  cr_assert(!memclass_shared(heap));
  cr_assert(memclass_shared(shm));
  cr_assert(!memclass_shared(priv));
  munmap(priv, 4096);
  munmap(shm, 4096);
  free(heap);
  memclass_use_scan(false);
}
