// Goroutine stacks (core/stack.cpp): sizes and alignment, the guard below
// the usable range faults (also on a stack reused from the pool, from a
// P's cache, and after the scavenger emptied it), freed stacks are reused
// by (size, guard) class and through the P cache (overflow to the pool,
// refill from it), and the scavenger gives an idle pooled stack's pages
// back to the kernel (not a recently freed one's; warm stacks are reused
// before scavenged ones, which come back zeroed and writable).
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch/arch.hpp"
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

// ---- reuse, scavenging and guards of reused stacks ------------------------------

#include <new>

#include "core/gmp.hpp"

namespace {

P* new_p() { return new (aligned_alloc(64, (sizeof(P) + 63) & ~size_t{63})) P(); }

bool mapped(uintptr_t lo, size_t len) {
  static unsigned char vec[4096];
  return mincore((void*)lo, len, vec) == 0;
}

const int64_t kLater = 60LL * 1000 * 1000 * 1000;

}  // namespace

// Default-size stacks go through the P's cache, last freed first out.
Test(stack, p_cache_reuses_last_freed_first) {
  P* pp = new_p();
  size_t sz = default_stack_size(), g = default_guard_size();
  Stack a, b, c, d;
  cr_assert(stack_alloc(pp, sz, g, &a));
  cr_assert(stack_alloc(pp, sz, g, &b));
  cr_assert_neq(a.lo, b.lo);
  stack_free(pp, a);
  stack_free(pp, b);
  cr_assert_eq(pp->nstackcache, 2);
  cr_assert(stack_alloc(pp, sz, g, &c));
  cr_assert(stack_alloc(pp, sz, g, &d));
  cr_expect_eq(c.lo, b.lo);
  cr_expect_eq(d.lo, a.lo);
  cr_assert_eq(pp->nstackcache, 0);
  cr_expect_eq(d.guard, g);
  cr_expect_eq(d.hi - d.lo, sz);
}

// A full P cache moves half of it to the global pool; another P with an
// empty cache refills from there instead of mapping new stacks.
Test(stack, p_cache_overflows_to_pool_and_refills) {
  P* p1 = new_p();
  P* p2 = new_p();
  size_t sz = default_stack_size(), g = default_guard_size();
  const int n = P::kStackCache + 1;
  static Stack s[P::kStackCache + 1];
  for (int i = 0; i < n; i++) cr_assert(stack_alloc(p1, sz, g, &s[i]));
  for (int i = 0; i < n; i++) stack_free(p1, s[i]);
  cr_assert_eq(p1->nstackcache, P::kStackCache / 2 + 1, "half went to the pool");
  Stack t;
  cr_assert(stack_alloc(p2, sz, g, &t));
  bool ours = false;
  for (int i = 0; i < n; i++) ours |= t.lo == s[i].lo;
  cr_expect(ours, "p2 got a pooled stack, not a new mapping");
  cr_expect_eq(p2->nstackcache, P::kStackCache / 2 - 1, "and refilled half its cache");
}

// Each (size, guard) class is its own: a stack with another guard is
// never handed out for it.
Test(stack, classes_differ_by_guard) {
  size_t pg = page_size();
  Stack a, b;
  cr_assert(stack_alloc(nullptr, 96 * 1024, 2 * pg, &a));
  stack_free(nullptr, a);
  cr_assert(stack_alloc(nullptr, 96 * 1024, pg, &b));
  cr_expect_neq(b.lo, a.lo);
  cr_expect_eq(b.guard, pg);
  stack_free(nullptr, b);
  Stack c;
  cr_assert(stack_alloc(nullptr, 96 * 1024, 2 * pg, &c));
  cr_expect_eq(c.lo, a.lo);
  cr_expect_eq(c.guard, 2 * pg);
}

// A reused stack keeps its guard: the byte below it faults.
Test(stack, guard_faults_on_a_reused_stack, .signal = SIGSEGV) {
  Stack a, b;
  cr_assert(stack_alloc(nullptr, 64 * 1024, page_size(), &a));
  memset((void*)a.lo, 1, a.hi - a.lo);
  stack_free(nullptr, a);
  cr_assert(stack_alloc(nullptr, 64 * 1024, page_size(), &b));
  cr_assert_eq(b.lo, a.lo, "reused");
  ((volatile char*)b.lo)[-1] = 1;
}

// The same through the P cache.
Test(stack, guard_faults_on_a_cached_stack, .signal = SIGSEGV) {
  P* pp = new_p();
  Stack a, b;
  cr_assert(stack_alloc(pp, default_stack_size(), default_guard_size(), &a));
  stack_free(pp, a);
  cr_assert(stack_alloc(pp, default_stack_size(), default_guard_size(), &b));
  cr_assert_eq(b.lo, a.lo, "reused");
  ((volatile char*)b.lo)[-1] = 1;
}

// And on a stack the scavenger emptied (its pages went back to the
// kernel): the guard is still there.
Test(stack, guard_faults_on_a_scavenged_stack, .signal = SIGSEGV) {
  Stack a, b;
  cr_assert(stack_alloc(nullptr, 64 * 1024, page_size(), &a));
  memset((void*)a.lo, 1, a.hi - a.lo);
  stack_free(nullptr, a);
  stack_scavenge(sys::coarsetime() + kLater);
  cr_assert_leq(resident_pages(a.lo, a.hi), 1, "scavenged");
  cr_assert(stack_alloc(nullptr, 64 * 1024, page_size(), &b));
  cr_assert_eq(b.lo, a.lo, "reused");
  // The guard's last byte, then the first one.
  ((volatile char*)b.lo)[-(long)page_size()] = 1;
}

// A scavenged stack comes back usable: every page writable, the returned
// ones zero (only the top page, the pool's bookkeeping, was kept).
Test(stack, scavenged_stack_is_reused_and_usable) {
  size_t pg = page_size();
  Stack a, b;
  cr_assert(stack_alloc(nullptr, 128 * 1024, pg, &a));
  memset((void*)a.lo, 0x77, a.hi - a.lo);
  stack_free(nullptr, a);
  stack_scavenge(sys::coarsetime() + kLater);
  cr_assert(stack_alloc(nullptr, 128 * 1024, pg, &b));
  cr_assert_eq(b.lo, a.lo);
  uintptr_t top = (b.hi - 1) & ~(uintptr_t)(pg - 1);
  for (uintptr_t p = b.lo; p < top; p++)
    cr_assert_eq(*(unsigned char*)p, 0, "byte at lo+%lu not zero", (unsigned long)(p - b.lo));
  memset((void*)b.lo, 0x55, b.hi - b.lo);
  stack_free(nullptr, b);
}

// The scavenger leaves recently freed stacks alone, and a warm stack is
// reused before a scavenged (cold) one of the same class.
Test(stack, scavenger_spares_recent_and_warm_goes_first) {
  size_t pg = page_size();
  Stack a, b, c, d;
  cr_assert(stack_alloc(nullptr, 80 * 1024, pg, &a));
  cr_assert(stack_alloc(nullptr, 80 * 1024, pg, &b));
  memset((void*)a.lo, 1, a.hi - a.lo);
  memset((void*)b.lo, 1, b.hi - b.lo);
  long all = (long)((a.hi - a.lo) / pg);
  stack_free(nullptr, a);
  stack_scavenge(sys::coarsetime());  // just freed: not idle long enough
  cr_expect_eq(resident_pages(a.lo, a.hi), all, "a fresh stack was scavenged");
  stack_scavenge(sys::coarsetime() + kLater);
  cr_expect_leq(resident_pages(a.lo, a.hi), 1, "an idle one was not");
  stack_free(nullptr, b);  // warm
  cr_assert(stack_alloc(nullptr, 80 * 1024, pg, &c));
  cr_assert(stack_alloc(nullptr, 80 * 1024, pg, &d));
  cr_expect_eq(c.lo, b.lo, "the warm stack first");
  cr_expect_eq(d.lo, a.lo, "then the cold one");
}

// With every class of the pool taken by other sizes, a freed stack of a
// new size is unmapped rather than kept.
Test(stack, pool_full_of_other_sizes_unmaps) {
  size_t pg = page_size();
  Stack s[9];
  for (int i = 0; i < 9; i++) cr_assert(stack_alloc(nullptr, (size_t)(40 + i) * pg, pg, &s[i]));
  for (int i = 0; i < 9; i++) stack_free(nullptr, s[i]);
  // The usable part only: qemu-user's mincore refuses a range with a
  // PROT_NONE guard in it (ENOMEM, as for an unmapped one).
  for (int i = 0; i < 8; i++) cr_expect(mapped(s[i].lo, s[i].hi - s[i].lo), "class %d kept", i);
  cr_expect(!mapped(s[8].lo, s[8].hi - s[8].lo), "the ninth size was unmapped");
}

// The pool is bounded (glibc's stack cache is too): past 256 pooled
// stacks, a freed one is unmapped, so thousands of exited threads leave
// no stacks behind.
Test(stack, pool_holds_at_most_256_stacks) {
  size_t pg = page_size();
  const int n = 300;
  static Stack s[n];
  for (int i = 0; i < n; i++) cr_assert(stack_alloc(nullptr, 24 * pg, pg, &s[i]));
  for (int i = 0; i < n; i++) stack_free(nullptr, s[i]);
  int kept = 0;
  for (int i = 0; i < n; i++) kept += mapped(s[i].lo, s[i].hi - s[i].lo);
  cr_expect_eq(kept, 256, "%d of %d freed stacks kept", kept, n);
  for (int i = 256; i < n; i++) cr_expect(!mapped(s[i].lo, s[i].hi - s[i].lo), "stack %d kept", i);
}

// A thread's end gives back its stack below the exit frame, all but
// arch::kGlibcStackMin under it (as glibc's start_thread does); nothing
// when sp is not on the stack.
Test(stack, release_unused_keeps_the_frames_and_glibcs_minimum) {
  size_t pg = page_size();
  Stack a;
  cr_assert(stack_alloc(nullptr, 1 << 20, pg, &a));
  memset((void*)a.lo, 1, a.hi - a.lo);
  long all = (long)((a.hi - a.lo) / pg);
  stack_release_unused(a, a.hi + pg);  // not on this stack
  cr_expect_eq(resident_pages(a.lo, a.hi), all);
  uintptr_t sp = a.hi - 3 * pg + 8;  // the exit frames in the top three pages
  stack_release_unused(a, sp);
  long kept = 3 + (long)(arch::kGlibcStackMin / pg);
  cr_expect_eq(resident_pages(a.lo, a.hi), kept, "%ld resident, %ld expected",
               resident_pages(a.lo, a.hi), kept);
  cr_expect_eq(resident_pages(a.hi - kept * pg, a.hi), kept, "the top ones stay");
  stack_free(nullptr, a);
}

// A goroutine that never went below the kept window wrote nothing in the
// page just under it: no system call, and its pages stay as they are.
Test(stack, release_unused_skips_a_shallow_stack) {
  size_t pg = page_size();
  Stack a;
  cr_assert(stack_alloc(nullptr, 1 << 20, pg, &a));
  long keep = 3 + (long)(arch::kGlibcStackMin / pg);
  memset((void*)(a.hi - keep * pg), 1, keep * pg);
  memset((void*)(a.lo + pg), 1, pg);  // far below: left for the scavenger
  uintptr_t sp = a.hi - 3 * pg + 8;
  stack_release_unused(a, sp);
  // (The look maps the shared zero page under the window: mincore counts
  // it, RSS does not.)
  cr_expect_eq(resident_pages(a.lo + pg, a.lo + 2 * pg), 1, "the far page was given back");
  cr_expect_eq(resident_pages(a.hi - keep * pg, a.hi), keep, "the top ones stay");
  // Once it went deeper (the page under the window written), all below goes.
  memset((void*)(a.hi - (keep + 1) * pg), 1, pg);
  stack_release_unused(a, sp);
  cr_expect_eq(resident_pages(a.lo, a.hi), keep, "%ld resident, %ld expected",
               resident_pages(a.lo, a.hi), keep);
  stack_free(nullptr, a);
}
