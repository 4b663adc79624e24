// core/tcb: the offset of glibc's cancelhandling in the TCB, found without
// libthread_db's descriptor (glibc before 2.34) by flipping the cancel
// state and type, is the descriptor's offset where glibc has one, and the
// word it names follows pthread_setcancelstate/pthread_setcanceltype.
#include <criterion/criterion.h>
#include <pthread.h>

#include "arch/arch.hpp"
#include "core/proc.hpp"
#include "core/real.hpp"
#include "core/tcb.hpp"

using namespace goshim;

namespace {
// The calling thread's struct pthread (at tp on x86-64, below it on aarch64).
uintptr_t self_pd() { return arch::get_tp() + tcb::pd_from_tp(); }
}  // namespace

Test(tcb, cancel_offset_found_by_probe) {
  uintptr_t me = self_pd();
  size_t off = tcb::find_cancel_offset(me);
  cr_assert_neq(off, 0u, "cancelhandling not found");
  if (const uint32_t* d = real::lazy::_thread_db_pthread_cancelhandling())
    cr_expect_eq(off, (size_t)d[2], "probe %zu, libthread_db %u", off, d[2]);
  volatile int* ch = (volatile int*)(me + off);
  int old;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  cr_expect(*ch & 1);
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, nullptr);
  cr_expect(!(*ch & 1));
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
  cr_expect(*ch & 2);
  pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, nullptr);
  cr_expect(!(*ch & 2));
}

namespace {
void* probe_thread(void*) { return (void*)tcb::find_cancel_offset(self_pd()); }
}  // namespace

// The same offset on a thread glibc created (the probe reads the TCB's
// first 1536 bytes).
Test(tcb, cancel_offset_same_on_other_thread) {
  pthread_t t;
  cr_assert_eq(pthread_create(&t, nullptr, probe_thread, nullptr), 0);
  void* r;
  pthread_join(t, &r);
  cr_expect_eq((size_t)r, tcb::find_cancel_offset(self_pd()));
}

// A process-shared object records a goroutine's shared id (its virtual tid
// moved by the per-process offset); core/pi.cpp turns it back into the
// virtual tid to find the owner. Kernel tids pass through both unchanged.
Test(tcb, shared_tid_round_trip) {
  const int32_t span = (1 << 30) - kVtidBase;
  const int32_t vtids[] = {kVtidBase, kVtidBase + 1, kVtidBase + 2, kVtidBase + 12345,
                           kVtidBase + span / 2, (1 << 30) - 2, (1 << 30) - 1};
  for (int32_t v : vtids) {
    pid_t s = tcb::shared_tid_of(v);
    cr_expect(is_virtual_tid(s) && s < (1 << 30), "shared id %d of %d out of range", s, v);
    cr_expect_eq(tcb::tid_of_shared(s), v, "%d -> %d -> %d", v, s, tcb::tid_of_shared(s));
  }
  cr_expect_eq(tcb::shared_tid_of(4321), 4321);
  cr_expect_eq(tcb::tid_of_shared(4321), 4321);
}
