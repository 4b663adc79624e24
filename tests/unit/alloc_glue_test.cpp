// core/jemalloc_glue: who is recorded as holding one of the allocator's
// locks (alloc_lock_holder), and whether an M asleep on such a lock keeps
// its P (alloc_wait_keeps_p, sysmon's check_m). Fake Ms and Gs that never
// run; this thread takes the locks as each kind of holder in turn (tls_g
// says which), and the kernel thread state sysmon would read is given.
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

#include <new>

#include "core/gmp.hpp"
#include "core/jemalloc_glue.hpp"

extern "C" {
int goshim_je_mutex_init(pthread_mutex_t* m, const pthread_mutexattr_t* a);
int goshim_je_mutex_lock(pthread_mutex_t* m);
int goshim_je_mutex_trylock(pthread_mutex_t* m);
int goshim_je_mutex_unlock(pthread_mutex_t* m);
}

using namespace goshim;

TestSuite(alloc_glue, .timeout = 30);

namespace {

template <class T>
T* new_aligned() {
  return new (aligned_alloc(64, (sizeof(T) + 63) & ~size_t{63})) T();
}

M* make_m(int id) {
  M* mp = new_aligned<M>();
  mp->id = id;
  mp->g0.flags = kGFlagG0;
  mp->g0.m = mp;
  mp->g0.status.store(GStatus::Running);
  return mp;
}

G* make_g(M* on) {
  G* gp = new_aligned<G>();
  gp->goid = 7;
  gp->magic = kGMagic;
  gp->status.store(GStatus::Running);
  gp->m = on;
  return gp;
}

char state_r(M*) { return 'R'; }
char state_s(M*) { return 'S'; }

}  // namespace

// A kernel thread goshim did not create (tls_g null) and a g0 are recorded
// as such, never as nobody: their waiters keep their Ps (they never park
// holding the lock), whatever the waiter's state.
Test(alloc_glue, thread_and_g0_holders_are_recorded) {
  pthread_mutex_t m;
  goshim_je_mutex_init(&m, nullptr);
  M* waiter = make_m(1);
  M* other = make_m(2);
  cr_assert_null(alloc_lock_holder(&m), "not held: nobody recorded");

  tls_g = nullptr;
  goshim_je_mutex_lock(&m);
  cr_assert_eq(alloc_lock_holder(&m), alloc_holder_thread(), "a foreign thread's lock");
  cr_assert(alloc_wait_keeps_p(alloc_lock_holder(&m), waiter, state_s));
  goshim_je_mutex_unlock(&m);
  cr_assert_null(alloc_lock_holder(&m), "released: nobody recorded");

  tls_g = &other->g0;
  cr_assert_eq(goshim_je_mutex_trylock(&m), 0);
  cr_assert_eq(alloc_lock_holder(&m), alloc_holder_thread(), "a g0's lock");
  cr_assert(alloc_wait_keeps_p(alloc_lock_holder(&m), waiter, state_s));
  goshim_je_mutex_unlock(&m);
  tls_g = nullptr;
}

// A goroutine holder: the P stays only while it runs on another M that the
// kernel can run.
Test(alloc_glue, goroutine_holder) {
  pthread_mutex_t m;
  goshim_je_mutex_init(&m, nullptr);
  M* waiter = make_m(1);
  M* hm = make_m(2);
  G* h = make_g(hm);
  tls_g = h;
  goshim_je_mutex_lock(&m);
  tls_g = nullptr;
  cr_assert_eq(alloc_lock_holder(&m), h);
  cr_assert(alloc_wait_keeps_p(h, waiter, state_r), "holder running: the wait ends by itself");
  cr_assert_not(alloc_wait_keeps_p(h, waiter, state_s),
                "holder asleep in the kernel (a program handler blocked in read): the P moves");
  h->m = waiter;
  cr_assert_not(alloc_wait_keeps_p(h, waiter, state_r), "a holder on the waiter's own M");
  h->m = hm;
  h->status.store(GStatus::Waiting);
  cr_assert_not(alloc_wait_keeps_p(h, waiter, state_r), "holder parked");
  h->status.store(GStatus::Runnable);
  cr_assert_not(alloc_wait_keeps_p(h, waiter, state_r), "holder waiting for a P");
  h->status.store(GStatus::Running);
  tls_g = h;
  goshim_je_mutex_unlock(&m);
  tls_g = nullptr;
}

// The lock word taken, no holder recorded yet: what a goroutine interrupted
// by a program signal handler right after the compare-and-swap of
// goshim_je_mutex_trylock (or between clearing the record and releasing
// the word in unlock) leaves while the handler blocks. The holder is
// unknown, so the waiter's P moves. (Read as a kernel thread before,
// every P stayed with an M asleep on the lock: malloc_signal_park hung.)
Test(alloc_glue, unrecorded_holder_is_unknown) {
  pthread_mutex_t m;
  goshim_je_mutex_init(&m, nullptr);
  M* waiter = make_m(1);
  m.__data.__lock = 1;  // taken; its holder was interrupted before the record
  cr_assert_null(alloc_lock_holder(&m));
  cr_assert_not(alloc_wait_keeps_p(alloc_lock_holder(&m), waiter, state_r));
  cr_assert_not(alloc_wait_keeps_p(alloc_lock_holder(&m), waiter, state_s));
}
