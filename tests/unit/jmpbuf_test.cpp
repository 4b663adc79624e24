// glibc's jmp_buf as core/jmpbuf.cpp reads it: after jmpbuf_init, the
// stack pointer it finds in a buffer filled by the C library's own setjmp
// and sigsetjmp is the one setjmp's caller had (a frame at a known depth),
// at two depths and on another stack, and a longjmp to the buffer lands
// there.
#include <criterion/criterion.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>

#include "arch/arch.hpp"
#include "core/jmpbuf.hpp"

using namespace goshim;

namespace {

jmp_buf jb;
sigjmp_buf sjb;

// setjmp's caller's stack pointer lies between this frame's stack pointer
// and its caller's.
[[gnu::noinline]] uintptr_t fill_and_read(uintptr_t* sp_here) {
  *sp_here = arch::get_sp();
  if (setjmp(jb) == 0) return jmpbuf_sp(jb);
  return 0;
}

[[gnu::noinline]] uintptr_t deeper(uintptr_t* sp_here) {
  volatile char pad[8192];
  pad[0] = 1;
  uintptr_t r = fill_and_read(sp_here);
  __asm__ volatile("" ::"r"(&pad[0]) : "memory");
  return r;
}

struct OnStack {
  uintptr_t got, here;
};
void on_other_stack(void* arg) {
  OnStack* o = (OnStack*)arg;
  o->got = fill_and_read(&o->here);
}

}  // namespace

Test(jmpbuf, setjmp_sp_found) {
  jmpbuf_init();
  uintptr_t here = 0, got = fill_and_read(&here);
  cr_assert_neq(got, 0u, "the layout did not check out");
  // The frame of fill_and_read: sp at setjmp's call within 256 bytes of
  // the sp read at its entry (both in that frame).
  cr_assert(got <= here + 256 && got + 256 >= here, "got %#lx, frame at %#lx", got, here);
  uintptr_t here2 = 0, got2 = deeper(&here2);
  cr_assert(got2 <= here2 + 256 && got2 + 256 >= here2, "got %#lx, frame at %#lx", got2, here2);
  cr_assert(got2 + 8192 <= got, "the deeper frame is not deeper: %#lx, %#lx", got2, got);
}

Test(jmpbuf, other_stack_and_sigsetjmp) {
  jmpbuf_init();
  size_t size = 256 * 1024;
  char* stk = (char*)aligned_alloc(64, size);
  cr_assert(stk);
  OnStack o{0, 0};
  goshim_call_on_stack(&o, on_other_stack, (uintptr_t)stk + size);
  cr_assert(o.got >= (uintptr_t)stk && o.got < (uintptr_t)stk + size, "%#lx not on the stack", o.got);
  cr_assert(o.got <= o.here + 256 && o.got + 256 >= o.here);
  free(stk);
  uintptr_t sp = arch::get_sp();
  if (sigsetjmp(sjb, 1) == 0) {
    uintptr_t got = jmpbuf_sp(sjb);
    cr_assert(got <= sp + 256 && got + 256 >= sp, "sigsetjmp: got %#lx, frame at %#lx", got, sp);
  }
}

Test(jmpbuf, longjmp_lands_at_the_sp) {
  jmpbuf_init();
  static volatile uintptr_t want;
  if (setjmp(jb) == 0) {
    want = jmpbuf_sp(jb);
    longjmp(jb, 1);
  }
  // Back in this frame after the jump: its stack pointer is the one the
  // buffer holds.
  uintptr_t now = arch::get_sp();
  cr_assert_neq(want, 0u);
  cr_assert(now <= want + 256 && now + 256 >= want, "landed at %#lx, buffer says %#lx", now, want);
}
