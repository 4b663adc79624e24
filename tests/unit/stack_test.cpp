// Goroutine stacks (core/stack.cpp): sizes and alignment, the guard below
// the usable range faults, freed stacks are reused by size class, and the
// scavenger gives an idle pooled stack's pages back to the kernel.
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/stack.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

long resident_pages(uintptr_t lo, uintptr_t hi) {
  size_t pg = page_size();
  static unsigned char vec[4096];
  size_t n = (hi - lo) / pg;
  cr_assert(n <= sizeof vec);
  cr_assert_eq(mincore((void*)lo, hi - lo, vec), 0);
  long r = 0;
  for (size_t i = 0; i < n; i++) r += vec[i] & 1;
  return r;
}

void setup() { stack_init(); }

}  // namespace

TestSuite(stack, .init = setup);

Test(stack, sizes_round_up_to_pages) {
  size_t pg = page_size();
  Stack s;
  cr_assert(stack_alloc(nullptr, 100 * 1024 + 1, 1, &s));
  cr_expect_eq(s.lo % pg, 0u);
  cr_expect_eq(s.hi % pg, 0u);
  cr_expect_eq(s.hi - s.lo, (100 * 1024 / pg + 1) * pg);
  cr_expect_eq(s.guard, pg);
  cr_expect(s.map_lo <= s.lo - s.guard, "the guard lies inside the mapping, below lo");
  cr_expect(s.map_lo + s.map_size >= s.hi);
  memset((void*)s.lo, 0x5a, s.hi - s.lo);  // every usable byte is writable
  stack_free(nullptr, s);
}

Test(stack, guard_faults, .signal = SIGSEGV) {
  Stack s;
  cr_assert(stack_alloc(nullptr, 64 * 1024, page_size(), &s));
  ((volatile char*)s.lo)[-1] = 1;  // the byte just below the stack
}

Test(stack, freed_stacks_are_reused_by_class) {
  Stack a, b, c;
  cr_assert(stack_alloc(nullptr, 96 * 1024, page_size(), &a));
  stack_free(nullptr, a);
  cr_assert(stack_alloc(nullptr, 96 * 1024, page_size(), &b));
  cr_expect_eq(b.lo, a.lo, "the pooled stack of the same class comes back");
  // Another size does not get it.
  stack_free(nullptr, b);
  cr_assert(stack_alloc(nullptr, 128 * 1024, page_size(), &c));
  cr_expect_neq(c.lo, a.lo);
  stack_free(nullptr, c);
}

Test(stack, scavenger_returns_idle_pages) {
  size_t pg = page_size();
  Stack s;
  cr_assert(stack_alloc(nullptr, 256 * 1024, pg, &s));
  memset((void*)s.lo, 1, s.hi - s.lo);
  cr_expect_eq(resident_pages(s.lo, s.hi), (long)((s.hi - s.lo) / pg));
  stack_free(nullptr, s);
  // Idle long enough (the scavenger's clock is the argument).
  int64_t later = sys::coarsetime() + 60LL * 1000 * 1000 * 1000;
  stack_scavenge(later);
  // At most the top page (the pool's bookkeeping) stays resident.
  cr_expect_leq(resident_pages(s.lo, s.hi), 1, "pages still resident after the scavenger ran");
}
