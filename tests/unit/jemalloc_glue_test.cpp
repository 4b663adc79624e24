// The allocator's locks (core/jemalloc_glue.cpp): the lock word names the
// holding goroutine at every instant the lock is held (issue 12: a holder
// stored after the CAS, and cleared before the release, left windows where
// the lock was held by nobody sysmon could see).
//
// The interrupt test plays the bug's scenario: one kernel thread, which
// is "the main goroutine" (tls_g = main_g()), takes and releases the lock
// in a tight loop while another thread sends it signals; the handler runs
// with the interrupted lock or unlock frozen at an arbitrary instruction,
// and whenever the lock is held then (trylock fails: only that thread
// takes it), alloc_lock_holder must name main_g(). The contention test
// checks that sleeping waiters keep the holder's name in the word, and the
// condvar test the sequence-futex condition variable.
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <stdio.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "core/gmp.hpp"
#include "core/jemalloc_glue.hpp"
#include "core/proc.hpp"

extern "C" {
int goshim_je_mutex_init(pthread_mutex_t* m, const pthread_mutexattr_t*);
int goshim_je_mutex_lock(pthread_mutex_t* m);
int goshim_je_mutex_trylock(pthread_mutex_t* m);
int goshim_je_mutex_unlock(pthread_mutex_t* m);
int goshim_je_cond_init(pthread_cond_t* c, const pthread_condattr_t* a);
int goshim_je_cond_signal(pthread_cond_t* c);
int goshim_je_cond_wait(pthread_cond_t* c, pthread_mutex_t* m);
int goshim_je_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m, const struct timespec* t);
}

using namespace goshim;

namespace {

// main_g() as the runtime sets it up: a live G with the main vtid.
G* fake_main() {
  G* g = main_g();
  g->vtid = kVtidBase;
  g->magic = kGMagic;
  return g;
}

pthread_mutex_t mu;
std::atomic<bool> stop{false};
std::atomic<long> held_seen{0}, unnamed{0}, misnamed{0}, handled{0};

void on_sig(int) {
  handled.fetch_add(1, std::memory_order_relaxed);
  if (goshim_je_mutex_trylock(&mu) == 0) {  // not held: the loop is outside lock..unlock
    goshim_je_mutex_unlock(&mu);
    return;
  }
  held_seen.fetch_add(1, std::memory_order_relaxed);
  G* h = alloc_lock_holder(&mu);
  if (!h) unnamed.fetch_add(1, std::memory_order_relaxed);
  else if (h != main_g()) misnamed.fetch_add(1, std::memory_order_relaxed);
}

void* locker(void*) {
  tls_g = fake_main();
  while (!stop.load(std::memory_order_relaxed)) {
    goshim_je_mutex_lock(&mu);
    goshim_je_mutex_unlock(&mu);
    if (goshim_je_mutex_trylock(&mu) == 0) goshim_je_mutex_unlock(&mu);
  }
  tls_g = nullptr;
  return nullptr;
}

}  // namespace

Test(jemalloc_glue, holder_named_whenever_held) {
  goshim_je_mutex_init(&mu, nullptr);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sig;
  sigemptyset(&sa.sa_mask);
  cr_assert_eq(sigaction(SIGUSR1, &sa, nullptr), 0);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, nullptr, locker, nullptr), 0);
  // Until enough signals have landed while the lock was held (each one at
  // an arbitrary instruction of lock, unlock or the loop).
  for (long i = 0; i < 400000 && (held_seen.load() < 5000 || i < 50000); i++) {
    cr_assert_eq(pthread_kill(t, SIGUSR1), 0);
    if (i % 64 == 0) sched_yield();
  }
  stop.store(true);
  cr_assert_eq(pthread_join(t, nullptr), 0);
  signal(SIGUSR1, SIG_DFL);
  cr_expect_gt(held_seen.load(), 0, "no signal landed while the lock was held (%ld handled)",
               handled.load());
  cr_expect_eq(unnamed.load(), 0, "%ld of %ld handlers found the lock held with no holder",
               unnamed.load(), held_seen.load());
  cr_expect_eq(misnamed.load(), 0, "%ld handlers found another holder", misnamed.load());
  cr_expect_null(alloc_lock_holder(&mu));
}

namespace {

pthread_mutex_t cmu;
long counter = 0;
std::atomic<long> bad_name{0};

void* contender(void* arg) {
  bool as_main = arg != nullptr;
  tls_g = as_main ? fake_main() : nullptr;
  for (int i = 0; i < 200000; i++) {
    goshim_je_mutex_lock(&cmu);
    // Held by this thread, whoever sleeps on the word meanwhile.
    G* h = alloc_lock_holder(&cmu);
    if (h != (as_main ? main_g() : nullptr)) bad_name.fetch_add(1, std::memory_order_relaxed);
    counter++;
    goshim_je_mutex_unlock(&cmu);
  }
  tls_g = nullptr;
  return nullptr;
}

}  // namespace

Test(jemalloc_glue, contended_lock_keeps_holder) {
  goshim_je_mutex_init(&cmu, nullptr);
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    cr_assert_eq(pthread_create(&t[i], nullptr, contender, i % 2 ? (void*)1 : nullptr), 0);
  for (int i = 0; i < 4; i++) cr_assert_eq(pthread_join(t[i], nullptr), 0);
  cr_expect_eq(counter, 4 * 200000L);
  cr_expect_eq(bad_name.load(), 0, "%ld times the word named another holder", bad_name.load());
  cr_expect_eq(goshim_je_mutex_trylock(&cmu), 0);
  cr_expect_eq(goshim_je_mutex_trylock(&cmu), EBUSY);
  goshim_je_mutex_unlock(&cmu);
}

namespace {

pthread_mutex_t vmu;
pthread_cond_t vcv;
int state = 0;  // 1: the waiter waits; 2: signaled

void* cond_waiter(void*) {
  goshim_je_mutex_lock(&vmu);
  state = 1;
  while (state != 2) goshim_je_cond_wait(&vcv, &vmu);
  // Relocked on return: the signaler cannot take it.
  long r = goshim_je_mutex_trylock(&vmu);
  goshim_je_mutex_unlock(&vmu);
  return (void*)r;
}

}  // namespace

Test(jemalloc_glue, condvar) {
  goshim_je_mutex_init(&vmu, nullptr);
  goshim_je_cond_init(&vcv, nullptr);
  // A deadline in the past: ETIMEDOUT, with the mutex held again.
  struct timespec past;
  clock_gettime(CLOCK_REALTIME, &past);
  past.tv_sec -= 1;
  goshim_je_mutex_lock(&vmu);
  cr_expect_eq(goshim_je_cond_timedwait(&vcv, &vmu, &past), ETIMEDOUT);
  cr_expect_eq(goshim_je_mutex_trylock(&vmu), EBUSY);
  struct timespec badns = past;
  badns.tv_nsec = 1000000000;
  cr_expect_eq(goshim_je_cond_timedwait(&vcv, &vmu, &badns), EINVAL);
  goshim_je_mutex_unlock(&vmu);

  for (int round = 0; round < 200; round++) {
    state = 0;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, nullptr, cond_waiter, nullptr), 0);
    for (;;) {  // until the waiter holds the mutex's condition
      goshim_je_mutex_lock(&vmu);
      if (state == 1) break;
      goshim_je_mutex_unlock(&vmu);
      sched_yield();
    }
    state = 2;
    goshim_je_cond_signal(&vcv);
    goshim_je_mutex_unlock(&vmu);
    void* r;
    cr_assert_eq(pthread_join(t, &r), 0);
    cr_expect_eq((long)r, EBUSY);
  }
}

namespace {

// A waiter asleep on the word of a lock that is free: the state a
// releaser's wake-up leaves when the thread it woke takes a signal before
// retaking the lock, and the signal's program handler blocks
// (malloc_signal_park at the default). alloc_wait_suspend, which the
// signal layer calls before such a handler, passes the wake-up on.
pthread_mutex_t smu;
std::atomic<int> waiter_state{0};  // 1: about to wait; 2: has the lock

void* sleeper(void*) {
  waiter_state.store(1);
  goshim_je_mutex_lock(&smu);
  waiter_state.store(2);
  goshim_je_mutex_unlock(&smu);
  return nullptr;
}

// Whether tid's kernel thread sleeps in a futex wait.
bool in_futex_wait(pid_t tid) {
  char path[64], buf[128] = {0};
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
  FILE* f = fopen(path, "r");
  if (!f) return false;
  bool r = fgets(buf, sizeof buf, f) && strncmp(buf, "202 ", 4) == 0;
  fclose(f);
  return r;
}

std::atomic<pid_t> sleeper_tid{0};

void* sleeper_tid_rec(void* a) {
  sleeper_tid.store((pid_t)syscall(SYS_gettid));
  return sleeper(a);
}

}  // namespace

Test(jemalloc_glue, suspended_wait_passes_its_wake_on) {
  goshim_je_mutex_init(&smu, nullptr);
  goshim_je_mutex_lock(&smu);  // held by this (foreign) thread
  pthread_t t;
  cr_assert_eq(pthread_create(&t, nullptr, sleeper_tid_rec, nullptr), 0);
  while (sleeper_tid.load() == 0 || !in_futex_wait(sleeper_tid.load())) usleep(1000);
  // The wake-up the unlock gives goes to "an M whose thread then took a
  // signal": released with the waiters bit, no futex wake.
  uint32_t* w = reinterpret_cast<uint32_t*>(&smu.__data.__lock);
  cr_assert(__atomic_load_n(w, __ATOMIC_RELAXED) & 2, "the waiter did not set the waiters bit");
  __atomic_store_n(w, 0, __ATOMIC_RELEASE);
  usleep(20000);
  cr_expect_eq(waiter_state.load(), 1, "the waiter woke without a wake-up");
  static M m;  // the interrupted M: its wait is suspended for the handler
  m.alloc_lock_wait.store(&smu);
  void* lk = alloc_wait_suspend(&m);
  cr_expect_eq(lk, (void*)&smu);
  cr_expect_null(m.alloc_lock_wait.load(), "the M still shows the wait while the handler runs");
  for (int i = 0; i < 5000 && waiter_state.load() != 2; i++) usleep(1000);
  cr_expect_eq(waiter_state.load(), 2, "the other waiter still sleeps on the free lock");
  alloc_wait_resume(&m, lk);
  cr_expect_eq(m.alloc_lock_wait.load(), (void*)&smu, "the wait is not resumed after the handler");
  if (waiter_state.load() != 2) syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  cr_assert_eq(pthread_join(t, nullptr), 0);
  // An M outside any wait: nothing to suspend, nothing woken.
  static M idle;
  cr_expect_null(alloc_wait_suspend(&idle));
  alloc_wait_resume(&idle, nullptr);
  cr_expect_null(idle.alloc_lock_wait.load());
}

// The releaser's side: a program signal handler that runs on a thread
// between its unlock's exchange (the word is free) and its futex wake
// would keep the waiter asleep on the free lock, holding its P, for as
// long as the handler runs (it may block). The release is marked
// (tls_je_unlocking) and alloc_unlock_finish, which the signal layer calls
// before a program handler on any thread, gives the wake then.
Test(jemalloc_glue, handler_in_unlock_gives_its_wake_first) {
  goshim_je_mutex_init(&smu, nullptr);
  waiter_state.store(0);
  sleeper_tid.store(0);
  goshim_je_mutex_lock(&smu);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, nullptr, sleeper_tid_rec, nullptr), 0);
  while (sleeper_tid.load() == 0 || !in_futex_wait(sleeper_tid.load())) usleep(1000);
  uint32_t* w = reinterpret_cast<uint32_t*>(&smu.__data.__lock);
  cr_assert(__atomic_load_n(w, __ATOMIC_RELAXED) & 2, "the waiter did not set the waiters bit");
  // The unlock as a signal finds it after its exchange: marked, word free,
  // no wake yet.
  tls_je_unlocking = &smu;
  __atomic_store_n(w, 0, __ATOMIC_RELEASE);
  usleep(20000);
  cr_expect_eq(waiter_state.load(), 1, "the waiter woke without a wake-up");
  alloc_unlock_finish();  // the signal layer, before the program's handler
  // The handler, which takes and releases another allocator lock, puts the
  // outer mark back.
  static pthread_mutex_t other;
  goshim_je_mutex_init(&other, nullptr);
  goshim_je_mutex_lock(&other);
  goshim_je_mutex_unlock(&other);
  cr_expect_eq(tls_je_unlocking, &smu, "a nested release lost the outer one's mark");
  for (int i = 0; i < 5000 && waiter_state.load() != 2; i++) usleep(1000);
  cr_expect_eq(waiter_state.load(), 2, "the waiter still sleeps on the free lock while the handler runs");
  tls_je_unlocking = nullptr;  // the interrupted unlock goes on (its wake is a spare one)
  if (waiter_state.load() != 2) syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  cr_assert_eq(pthread_join(t, nullptr), 0);
  // A complete release leaves no mark; with none, nothing is woken.
  goshim_je_mutex_lock(&smu);
  goshim_je_mutex_unlock(&smu);
  cr_expect_null(tls_je_unlocking);
  alloc_unlock_finish();
}
