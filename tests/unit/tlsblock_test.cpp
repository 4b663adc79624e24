// tls::block_init and block_clean_at_exit (core/tls.cpp): a goroutine's
// TLS block as a new thread would have it. On a block of this process's
// layout (tls::init on the running glibc, as tls_test): every static TLS
// module's initialized data copied from its image, its .tbss zeroed, the
// TCB's self pointers, the DTV pointing into the new block at the offsets
// this thread's DTV has, the G's tid, tls_g and the struct pthread fields
// goshim sets; a recycled block brought back the same way whatever the
// previous thread left in it.
#include <criterion/criterion.h>
#include <gnu/libc-version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#include "arch/arch.hpp"
#include "core/gmp.hpp"
#include "core/real.hpp"
#include "core/tls.hpp"

using namespace goshim;

// This module's (the test program's) static TLS: initialized data and
// .tbss. Each test dirties this thread's copies first, so that a value
// found in a new block can only come from the image.
__thread unsigned tdata_word = 0x5eed1234u;
__thread char tdata_text[16] = "tls image";
__thread unsigned long tbss_words[32];

namespace {

int glibc_minor() {
  int major = 0, minor = 0;
  sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor);
  return major == 2 ? minor : 1000;
}

// tls::init on the running glibc. False where goshim refuses M:N before
// any probe (glibc < 2.34; tls_test checks that refusal): nothing to test.
bool layout() {
  real::resolve();
  const char* why = nullptr;
  bool ok = tls::init(&why);
  if (glibc_minor() < 34) return false;
  cr_assert(ok, "tls::init refused this glibc: %s", why ? why : "(no reason)");
  return true;
}

template <typename T>
T& at(uintptr_t base, size_t off) {
  return *reinterpret_cast<T*>(base + off);
}

// The address of this thread's TLS variable v in the block at tp (static
// TLS: the same offset from every thread pointer).
template <typename T>
T* in_block(uintptr_t tp, T* v) {
  return reinterpret_cast<T*>(tp + ((uintptr_t)v - arch::get_tp()));
}

struct Block {
  void* base;
  uintptr_t tp;
};

// Zeroed memory for one block, aligned as the arena aligns it.
Block new_block() {
  size_t align = tls::L.static_align < 64 ? 64 : tls::L.static_align;
  size_t bytes = (tls::block_bytes() + align - 1) & ~(align - 1);
  void* base = aligned_alloc(align, bytes);
  cr_assert_not_null(base);
  memset(base, 0, bytes);
  return Block{base, (uintptr_t)base + tls::L.below_tp};
}

G* new_g(int32_t vtid) {
  size_t bytes = (sizeof(G) + 63) & ~size_t{63};
  G* gp = new (aligned_alloc(64, bytes)) G();
  gp->vtid = vtid;
  return gp;
}

void dirty_this_thread() {
  tdata_word = 0xdeadbeefu;
  strcpy(tdata_text, "changed");
  for (auto& w : tbss_words) w = ~0ul;
}

// glibc's DTV as the TCB holds it: the pointer is to dtv[1] of an array
// of 16-byte entries; entry -1 holds the length, entry i module i's block.
struct DtvEntry {
  uintptr_t val;
  uintptr_t is_static;
};
DtvEntry* dtv_of(uintptr_t tp) {
#if defined(__x86_64__)
  return at<DtvEntry*>(tp, 8);  // tcbhead_t.dtv
#else
  return at<DtvEntry*>(tp, 0);  // variant I: tcbhead_t.dtv at tp
#endif
}

// What block_init promises of a block for gp, against this thread's.
void expect_new_thread_block(uintptr_t tp, G* gp) {
  // Static TLS: data from the image, .tbss zero.
  cr_expect_eq(*in_block(tp, &tdata_word), 0x5eed1234u, "initialized TLS not copied from the image");
  cr_expect_str_eq(in_block(tp, tdata_text), "tls image");
  unsigned long* bss = in_block(tp, &tbss_words[0]);
  for (int i = 0; i < 32; i++) cr_expect_eq(bss[i], 0ul, "tbss word %d not zeroed", i);
  // goshim's own static TLS in the block: tls_g is the G.
  cr_expect_eq(at<G*>(tp + tls::L.tls_g, 0), gp, "tls_g is not the G");
#if defined(__x86_64__)
  // tcbhead_t: tcb and self point at the TCB; stack and pointer guards
  // are the initial thread's (glibc copies them into every thread).
  uintptr_t t0 = tls::initial_tp();
  cr_expect_eq(at<uintptr_t>(tp, 0x00), tp, "tcbhead.tcb");
  cr_expect_eq(at<uintptr_t>(tp, 0x10), tp, "tcbhead.self");
  cr_expect_eq(at<int>(tp, 0x18), 1, "multiple_threads");
  cr_expect_eq(at<uintptr_t>(tp, 0x28), at<uintptr_t>(t0, 0x28), "stack guard");
  cr_expect_eq(at<uintptr_t>(tp, 0x30), at<uintptr_t>(t0, 0x30), "pointer guard");
#endif
  // struct pthread: tid (the G's virtual tid), the list pointing at
  // itself, an empty robust list, the resolver state and specific[0].
  cr_expect_eq(tls::get_tid(tp), gp->vtid);
  cr_expect_eq(at<uintptr_t>(tp, tls::L.list), tp + tls::L.list, "list.next");
  cr_expect_eq(at<uintptr_t>(tp, tls::L.list + 8), tp + tls::L.list, "list.prev");
  cr_expect_eq(at<uintptr_t>(tp, tls::L.robust_head), tp + tls::L.robust_head, "robust list head");
  cr_expect_eq(at<uintptr_t>(tp, tls::L.robust_prev), tp + tls::L.robust_head, "robust_prev");
  cr_expect_eq(at<uintptr_t>(tp + tls::L.resp, 0), tp + tls::L.res, "__resp -> its own res");
  cr_expect_eq(at<uintptr_t>(tp, tls::L.specific), tp + tls::L.specific_1stblock, "specific[0]");
  cr_expect_eq(at<int>(tp, tls::L.cancelhandling), 0, "cancelhandling");
  // The DTV: every static module this thread's DTV points into its own
  // block, the new one points into the new block at the same offset.
  DtvEntry* mine = dtv_of(arch::get_tp());
  DtvEntry* its = dtv_of(tp);
  cr_assert_not_null(its, "no DTV");
  cr_assert_neq(its, mine, "the DTV is this thread's");
  size_t n = mine[-1].val < its[-1].val ? mine[-1].val : its[-1].val;
  uintptr_t lo = arch::get_tp() - tls::L.below_tp, hi = arch::get_tp() + tls::L.above_tp;
  int checked = 0;
  for (size_t i = 1; i <= n; i++) {
    uintptr_t v = mine[i].val;
    if (v < lo || v >= hi) continue;  // not static TLS of this block
    cr_expect_eq(its[i].val - tp, v - arch::get_tp(), "DTV entry %zu", i);
    checked++;
  }
  cr_expect_geq(checked, 1, "no static module in the DTV (the test program's is)");
}

}  // namespace

Test(tlsblock, fresh_block_is_a_new_threads) {
  if (!layout()) return;
  dirty_this_thread();
  Block b = new_block();
  G* gp = new_g(4242);
  cr_assert(tls::block_init(b.tp, gp, true));
  expect_new_thread_block(b.tp, gp);
}

Test(tlsblock, recycled_block_is_brought_back) {
  if (!layout()) return;
  dirty_this_thread();
  Block b = new_block();
  G* g1 = new_g(100);
  cr_assert(tls::block_init(b.tp, g1, true));
  DtvEntry* dtv = dtv_of(b.tp);
  // What the first thread leaves behind.
  *in_block(b.tp, &tdata_word) = 1;
  strcpy(in_block(b.tp, tdata_text), "left over");
  memset(in_block(b.tp, &tbss_words[0]), 0xa5, sizeof tbss_words);
  at<int>(b.tp, tls::L.cancelhandling) = 0x10;  // EXITING
  at<uintptr_t>(b.tp, tls::L.specific) = 0;
  G* g2 = new_g(101);
  cr_assert(tls::block_init(b.tp, g2, false));
  expect_new_thread_block(b.tp, g2);
  cr_expect_eq(dtv_of(b.tp), dtv, "a recycled block keeps its DTV");
}

Test(tlsblock, cleaned_at_exit_then_kept) {
  if (!layout()) return;
  dirty_this_thread();
  Block b = new_block();
  G* gp = new_g(77);
  cr_assert(tls::block_init(b.tp, gp, true));
  *in_block(b.tp, &tdata_word) = 2;
  memset(in_block(b.tp, &tbss_words[0]), 0x5a, sizeof tbss_words);
  cr_assert(tls::block_clean_at_exit(b.tp, gp));
  // Clean already: the next create of the same G's slot writes nothing.
  bool kept = false;
  cr_assert(tls::block_init(b.tp, gp, false, true, &kept));
  cr_expect(kept, "a clean block was not kept");
  expect_new_thread_block(b.tp, gp);
}
