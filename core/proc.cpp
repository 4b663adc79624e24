// Goroutine lifecycle and the G arena (see proc.hpp).
//
// The arena is one reserved MAP_NORESERVE region cut into equal slots,
// with the Gs themselves in a second region, one G per slot index. A slot
// holds a G's glibc static TLS block and its TCB (struct pthread, at the
// slot's thread pointer) and, in the usual mode, the G's stack of the
// default size right below them (the TLS block carved from the top of the
// stack, as glibc's own threads have it; a smaller stack takes the top
// of that one, with a guard of its own: slot_inner_guard):
//
//   slot base                                                 slot end (page)
//   | guard | stack (default size) ... | static TLS (below_tp) | struct pthread |  (x86-64)
//   | guard | stack (default size) ... | struct pthread        | tcbhead, TLS   |  (aarch64)
//                                      ^ stack.hi              ^ tp
//
// An idle goroutine then touches the block's two top pages only (the TCB,
// the used TLS just below tp, and its first stack frames in the same page
// as the static TLS surplus), instead of a separate stack page next to a
// packed block. A G whose stack is larger than the slot's, has another
// guard size or is the program's own (pthread_attr_setstack) leaves the
// slot's stack unused (virtual only) and gets a stack from core/stack.
// Without MADV_GUARD_INSTALL (a guard page per slot would split the
// arena's mapping into millions) or without room for the reservation, the
// slots hold the TLS block only (no stack) and every stack comes from
// core/stack.
//
// pthread_t == tp + tls::L.pd, so pthread_t -> G is arithmetic plus a range check, and
// a pointer into the arena is always readable (slots are never unmapped).
// Slots are recycled through per-P free lists and a global one. A G's end
// gives back its stack's pages below the exit frames, less glibc's
// PTHREAD_STACK_MIN (stack_release_unused, as glibc's start_thread), and
// the rest of a slot stack that sat on the global list for a while goes
// back too (gfree_scavenge).
#include "core/proc.hpp"
#include "core/privfd.hpp"
#include "core/rtlock.hpp"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <new>

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#ifndef MADV_GUARD_REMOVE
#define MADV_GUARD_REMOVE 103
#endif

#include "arch/arch.hpp"
#include "core/contract.hpp"
#include "core/cputime.hpp"
#include "core/dump.hpp"
#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "core/sema.hpp"
#include "core/signal.hpp"
#include "core/stack.hpp"
#include "core/tls.hpp"
#include "core/trace.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

void (*g_exit_hook)(G* gp) = nullptr;

namespace {
constexpr int kMaxExitHooks = 8;
std::atomic<void (*)(G*)> exit_hooks[kMaxExitHooks];
}  // namespace

bool add_g_exit_hook(void (*fn)(G* gp)) {
  for (int i = 0; i < kMaxExitHooks; i++) {
    void (*none)(G*) = nullptr;
    if (exit_hooks[i].compare_exchange_strong(none, fn, std::memory_order_acq_rel)) return true;
    if (none == fn) return true;
  }
  return false;
}

namespace {

// Whether glibc's cancellation unwound gp (the canceled bit is set).
bool cancel_pending_or_exiting_canceled(G* gp) {
  int ch = __atomic_load_n((int*)(gp->tp + tls::L.cancelhandling), __ATOMIC_ACQUIRE);
  return ch & (1 << 3);
}

constexpr size_t kMaxSlots = (size_t)1 << 22;
// Slots with stacks: at most this much address space for the arena.
constexpr size_t kSlotStackVa = (size_t)16 << 40;
// and stacks of at most this size in them (a larger default leaves too
// few slots).
constexpr size_t kMaxSlotStack = (size_t)16 << 20;

uintptr_t arena_lo = 0;
size_t slot_size = 0;  // stride between slots
size_t slot_tp = 0;    // tp's offset from its slot's base
size_t max_slots = 0;
size_t tcb_span = 0;   // the block above tp (tls::L.above_tp) rounded to 64
size_t slot_stack = 0;  // usable bytes of a slot's stack; 0: slots hold no stack
uintptr_t garena = 0;   // the Gs, one per slot index
size_t g_stride = 0;
std::atomic<size_t> nslots{0};

constinit G g1;  // main

G* slot_g(size_t idx) { return (G*)(garena + idx * g_stride); }

// A slot stack's guard: one page, or arch::kMinStackGuard where a signal
// frame pushed on an overflowed stack is larger than a page (aarch64: the
// frame would otherwise reach the slot below, core/stack.cpp map_stack).
size_t slot_guard_bytes() {
  size_t pg = page_size();
  size_t min = (arch::kMinStackGuard + pg - 1) & ~(pg - 1);
  return min > pg ? min : pg;
}

// The stack of the slot whose thread pointer is tp.
Stack slot_stack_of(uintptr_t tp) {
  size_t pg = page_size();
  Stack s;
  s.hi = tp - tls::L.below_tp;
  s.lo = s.hi - slot_stack;
  s.guard = pg;
  s.map_lo = 0;  // not a mapping of its own: never given to core/stack
  s.map_size = 0;
  return s;
}

// The guard of a slot's stack (slot_guard_bytes): below the stack's lowest
// whole page.
uintptr_t slot_guard_of(uintptr_t tp) {
  size_t pg = page_size();
  uintptr_t lo = tp - tls::L.below_tp - slot_stack;
  return (lo & ~(uintptr_t)(pg - 1)) - slot_guard_bytes();
}

// A stack smaller than the default one (with the default guard) lives in
// the slot too: the top `pages` pages of the slot's stack, right below the
// TLS block as glibc puts a thread's stack of any size, with a guard of its
// own in the slot's unused stack below it. In a mapping of its own (core/
// stack) the stack's first frames took a page of their own where a kernel
// thread has them in the page of its static TLS: a page more than natively
// whenever the stack's depth modulo a page fell within that page's free
// room (about 1 KiB: a quarter of the threads of a program that sets its
// threads' stack size; tests/preload/stack_sizes; not MariaDB's
// connections, bench/RESULTS.md). The guard
// stays while the G waits on the free lists (G::slot_guard_pages), so a
// program that creates its threads with one size installs it once per
// slot; another size moves it, and the default size removes it.
uintptr_t slot_inner_guard_of(uintptr_t tp, size_t pages) {
  size_t pg = page_size();
  uintptr_t lo = tp - tls::L.below_tp - pages * pg;
  return (lo & ~(uintptr_t)(pg - 1)) - slot_guard_bytes();
}

// Whether gp's slot has the guard below a stack of `pages` pages at its
// top (0: no such guard, the whole slot stack usable), moving it if not.
bool slot_inner_guard(G* gp, size_t pages) {
  if (gp->slot_guard_pages == pages) return true;
  size_t gb = slot_guard_bytes();
  if (gp->slot_guard_pages) {
    if (sys::madvise((void*)slot_inner_guard_of(gp->tp, gp->slot_guard_pages), gb,
                     MADV_GUARD_REMOVE) != 0)
      return false;
    gp->slot_guard_pages = 0;
  }
  if (pages) {
    // Pages a deeper stack of an earlier G left there are dropped.
    if (sys::madvise((void*)slot_inner_guard_of(gp->tp, pages), gb, MADV_GUARD_INSTALL) != 0)
      return false;
    gp->slot_guard_pages = (uint32_t)pages;
  }
  return true;
}

// Fresh slots with stacks get their guards in batches once a program has
// created a few dozen threads: one process_madvise installs the guards of
// up to kPrepareMax slots instead of a madvise per slot. (Populating the
// slots' top pages and Gs the same way, MADV_POPULATE_WRITE, took the page
// faults away but not their cost: bench/RESULTS.md, "Fresh slots".) Slots
// below prepared_hi have their guard installed; a batch starts at
// prepared_hi and moves it on once its guards are in, so slots are
// prepared in order. A batch is at most a sixteenth of the slots in use.
constexpr size_t kPrepareMax = 64;
std::atomic<size_t> prepared_hi{0};

// Installs the guards of slots [h, h + k) and moves prepared_hi from h to
// h + k. False if that failed (the caller installs its own slot's guard as
// before).
bool prepare_slots(size_t h, size_t k) {
  struct iovec guards[kPrepareMax];
  size_t gb = slot_guard_bytes();
  for (size_t i = 0; i < k; i++) guards[i] = {(void*)slot_guard_of(arena_slot_tp(h + i)), gb};
  if (sys::process_madvise_self(guards, k, MADV_GUARD_INSTALL) != (long)(k * gb)) return false;
  prepared_hi.compare_exchange_strong(h, h + k, std::memory_order_release,
                                      std::memory_order_relaxed);
  return true;
}

// Whether the guard of slot idx (with a stack) is installed, installing it
// (and preparing a batch from idx on) if not.
bool slot_guard_ready(size_t idx) {
  size_t h = prepared_hi.load(std::memory_order_acquire);
  if (idx < h) return true;
  if (idx == h && madvise_batch_works()) {
    size_t k = idx / 16;
    if (k > kPrepareMax) k = kPrepareMax;
    if (k > max_slots - idx) k = max_slots - idx;
    if (k >= 2 && prepare_slots(idx, k)) return true;
  }
  if (sys::madvise((void*)slot_guard_of(arena_slot_tp(idx)), slot_guard_bytes(),
                   MADV_GUARD_INSTALL) != 0)
    return false;
  if (idx == h)
    prepared_hi.compare_exchange_strong(h, h + 1, std::memory_order_release,
                                        std::memory_order_relaxed);
  return true;
}

G* galloc() {
  size_t idx = nslots.fetch_add(1, std::memory_order_relaxed);
  if (idx >= max_slots) {
    nslots.fetch_sub(1, std::memory_order_relaxed);
    return nullptr;
  }
  uintptr_t tp = arena_slot_tp(idx);
  if (slot_stack && !slot_guard_ready(idx)) {
    // The probe at arena_init worked: out of memory for the page table.
    // The slot stays counted (others may have taken later ones) but unused.
    return nullptr;
  }
  G* gp = new (slot_g(idx)) G();
  gp->tp = tp;
  gp->vtid = kVtidBase + 1 + (int32_t)idx;
  gp->magic = kGMagic;
  return gp;
}

// Locks held: sched.gflock. Puts gp on the global free list (warm end).
void gfput_global_locked(G* gp, int64_t now) {
  GOSHIM_LOCK_HELD(&sched.gflock, "sched.gflock");
  gp->freed_at = now;
  gp->schedlink = sched.gfree;
  sched.gfree = gp;
  sched.ngfree++;
}

// Locks held: sched.gflock. Takes a G from the global list, warm ones
// first, or null.
G* gfget_global_locked() {
  GOSHIM_LOCK_HELD(&sched.gflock, "sched.gflock");
  G* gp = sched.gfree;
  if (gp) {
    sched.gfree = gp->schedlink;
  } else if ((gp = sched.gfree_cold)) {
    sched.gfree_cold = gp->schedlink;
  }
  if (gp) sched.ngfree--;
  return gp;
}

// Free G lists. Owner P only for pp's list.
void gfput(P* pp, G* gp) {
  gp->status.store(GStatus::Idle, std::memory_order_release);
  if (!pp) {
    int64_t now = sys::coarsetime();
    MutexGuard g(sched.gflock);
    gfput_global_locked(gp, now);
    return;
  }
  gp->schedlink = pp->gfree;
  pp->gfree = gp;
  pp->ngfree++;
  if (pp->ngfree >= 64) {
    int64_t now = sys::coarsetime();
    MutexGuard g(sched.gflock);
    while (pp->ngfree >= 32) {
      G* x = pp->gfree;
      pp->gfree = x->schedlink;
      pp->ngfree--;
      gfput_global_locked(x, now);
    }
  }
}

G* gfget(P* pp) {
  if (!pp) {
    MutexGuard g(sched.gflock);
    return gfget_global_locked();
  }
  if (!pp->gfree && (sched.gfree || sched.gfree_cold)) {
    MutexGuard g(sched.gflock);
    while (pp->ngfree < 32) {
      G* x = gfget_global_locked();
      if (!x) break;
      x->schedlink = pp->gfree;
      pp->gfree = x;
      pp->ngfree++;
    }
  }
  G* gp = pp->gfree;
  if (gp) {
    pp->gfree = gp->schedlink;
    pp->ngfree--;
  }
  return gp;
}

// Reaps a finished G: its slot goes back to a free list. Main is never
// recycled (its TLS block and stack belong to the initial thread).
void reap(G* gp) {
  if (gp->is_main()) return;
  G* cur = getg();
  P* pp = (cur && cur->m) ? cur->m->p : nullptr;
  gfput(pp, gp);
}

// On g0: the G has run its destructors; release its resources and wake a
// joiner.
void goexit_g0(void* arg) {
  GOSHIM_ON_G0();
  G* gp = (G*)arg;
  M* mp = gp->m;
  P* pp = mp->p;
  signal_leave_altstack(mp);  // the exited G's stack may be freed at once (signal.hpp)
  trace_ev(TraceEv::GStop, gp, (uint64_t)TraceStop::Exit);
  cputime_out(gp);
  mp->cw.block_at = 0;  // (an exit from inside a blocking call: a handler's pthread_exit)
  mp->curg = nullptr;
  gp->m = nullptr;
  gp->rt_locked = false;
  gp->tid_bound = false;
  // As glibc's start_thread: the stack's pages below the exit frames (less
  // glibc's PTHREAD_STACK_MIN) go back to the kernel before the stack waits
  // on a free list or in a pool (a slot stack stays with its G). Not a
  // program's own stack.
  if (!gp->is_main() && !(gp->flags & kGFlagUserStack))
    stack_release_unused(gp->stack, gp->sched_sp);
  // The block is dead and hot in this CPU's cache: reset it here rather
  // than at the next create, which may run on another CPU.
  if (!gp->is_main()) {
    Stack ss = slot_stack ? slot_stack_of(gp->tp) : Stack{};
    bool slot = slot_stack && gp->stack.lo == ss.lo && gp->stack.hi == ss.hi;
    gp->block_clean = tls::block_clean_at_exit(gp->tp, gp, slot ? ss.lo : 0, ss.hi - ss.lo);
    gp->block_slot_stack = slot;
  }
  gp->status.store(GStatus::Dead, std::memory_order_release);
  if (!gp->is_main() && !(gp->flags & kGFlagUserStack) && gp->stack.map_lo)
    stack_free(pp, gp->stack);
  gp->stack = Stack{};
  uint32_t s = gp->join_state.load(std::memory_order_acquire);
  for (;;) {
    if (s & kJoinDetached) {
      if (!gp->is_main()) gfput(pp, gp);
      break;
    }
    if (gp->join_state.compare_exchange_weak(s, s | kJoinExited, std::memory_order_acq_rel)) {
      // From here a joiner may reap gp at any moment: only its address is
      // used below (a spurious wake of a later G's joiner is harmless).
      sema_wake(&gp->join_state, INT_MAX);
      break;
    }
  }
  // A real-time G ended on its own M, without a P (its destructors and
  // its joiner's wake ran with its policy, as natively): SCHED_OTHER back.
  if (!pp) rt_exit_m();
  schedule();
}

// First code of every created G, on its own stack and TLS.
void g_entry(void* arg) {
  G* gp = (G*)arg;
  gp->started = true;
  tls::first_run();
  __pthread_unwind_buf_t ub;
  int not_first = _setjmp((struct __jmp_buf_tag*)ub.__cancel_jmp_buf);
  if (!not_first) {
    // After setjmp: the private part may overlap what setjmp saved.
    ub.__pad[0] = nullptr;  // prev
    ub.__pad[1] = nullptr;  // cleanup
    tls::set_cleanup_jmp_buf(gp->tp, &ub);
    if (signal_has_pending(gp)) signal_deliver(gp);
    // A real-time attribute: applied to this M before the routine runs.
    if (gp->rt_start && !rt_start(gp)) thread_exit_landed();
    void* r = gp->start_routine(gp->start_arg);
    getg()->retval = r;
    // Returned: whatever pthread_cancel did meanwhile (the canceled bit
    // set after the routine's last cancellation point), r is the result.
    thread_exit_landed(false);
  }
  thread_exit_landed();
}

}  // namespace

// ---- arena -----------------------------------------------------------------

void arena_init() {
  size_t pg = page_size();
  // What lies above tp: struct pthread (x86-64), or the tcbhead and the
  // static TLS (aarch64).
  tcb_span = (tls::L.above_tp + 63) & ~(size_t)63;
  size_t align = tls::L.static_align < 64 ? 64 : tls::L.static_align;
  g_stride = (sizeof(G) + 63) & ~(size_t)63;
  size_t block = tls::L.below_tp + tcb_span;
  // Slots with stacks: [guard page][stack][block], the slot a whole number
  // of pages, tp aligned for the static TLS.
  size_t ss = default_stack_size();
  if (stack_guard_is_madvise() && ss <= kMaxSlotStack && align <= pg) {
    size_t stride = ((block + ss + pg - 1) & ~(pg - 1)) + pg + slot_guard_bytes();
    size_t n = kSlotStackVa / stride;
    if (n > kMaxSlots) n = kMaxSlots;
    void* p = sys::mmap(nullptr, stride * n, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void* gm = p == MAP_FAILED ? MAP_FAILED
                               : sys::mmap(nullptr, g_stride * n, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED && gm != MAP_FAILED) {
      // Out of core dumps (arena_core_dump_mark puts the live slots back):
      // the kernel walks a dumped anonymous mapping page by page, ~4e9
      // look-ups for 16 TiB, so a crash with core dumps on took minutes.
      sys::madvise(p, stride * n, MADV_DONTDUMP);
      sys::madvise(gm, g_stride * n, MADV_DONTDUMP);
      arena_lo = (uintptr_t)p;
      slot_size = stride;
      slot_tp = (stride - tcb_span) & ~(uintptr_t)(align - 1);
      max_slots = n;
      garena = (uintptr_t)gm;
      slot_stack = ss;
      // The kernel may refuse guard regions on this mapping: then no slot
      // stacks (the probe's guard stays, harmless: slot 0's stack is unused).
      if (sys::madvise((void*)slot_guard_of(arena_slot_tp(0)), slot_guard_bytes(),
                       MADV_GUARD_INSTALL) == 0)
        return;
      slot_stack = 0;
      sys::munmap(p, stride * n);
      sys::munmap(gm, g_stride * n);
    } else if (p != MAP_FAILED) {
      sys::munmap(p, stride * n);
    }
  }
  // Slots of TLS blocks only.
  slot_size = (block + align - 1) & ~(align - 1);
  slot_tp = tls::L.below_tp;
  max_slots = kMaxSlots;
  slot_stack = 0;
  void* p = sys::mmap(nullptr, slot_size * max_slots + align, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void* gm = sys::mmap(nullptr, g_stride * max_slots, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED || gm == MAP_FAILED) fatal("cannot reserve the goroutine arena");
  sys::madvise(p, slot_size * max_slots + align, MADV_DONTDUMP);
  sys::madvise(gm, g_stride * max_slots, MADV_DONTDUMP);
  arena_lo = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
  garena = (uintptr_t)gm;
}

uintptr_t arena_slot_tp(size_t idx) { return arena_lo + idx * slot_size + slot_tp; }

namespace {
constexpr size_t kCoreMaxRanges = 1024;
constexpr size_t kCoreMaxSlots = 4096;
struct CoreMark {
  uintptr_t lo = 0, hi = 0;
  size_t ranges = 0, slots = 0;
  void flush() {
    if (hi > lo) sys::madvise((void*)lo, hi - lo, MADV_DODUMP);
    lo = hi = 0;
  }
  // Whether slot idx was added (false: a bound reached).
  bool add(size_t idx) {
    if (slots >= kCoreMaxSlots) return false;
    uintptr_t b = arena_lo + idx * slot_size, e = b + slot_size;
    if (hi == b && hi != 0) {
      hi = e;
    } else {
      if (ranges >= kCoreMaxRanges) return false;
      flush();
      lo = b;
      hi = e;
      ranges++;
    }
    slots++;
    return true;
  }
};
bool slot_live(size_t idx) {
  G* gp = slot_g(idx);
  return gp->magic == kGMagic && gp->status.load(std::memory_order_acquire) != GStatus::Idle;
}
}  // namespace

// Signal-safe, once. See proc.hpp.
void arena_core_dump_mark(G* self) {
  static std::atomic<bool> once{false};
  if (once.exchange(true, std::memory_order_acq_rel) || !garena) return;
  size_t pg = page_size();
  size_t n = arena_nslots();
  if (n > max_slots) n = max_slots;
  // The Gs of every slot ever used: one range.
  size_t gbytes = (n * g_stride + pg - 1) & ~(pg - 1);
  if (gbytes) sys::madvise((void*)garena, gbytes, MADV_DODUMP);
  CoreMark m;
  // The crashing goroutine's slot first, whatever the bounds.
  size_t own = (size_t)-1;
  if (self && self->tp >= arena_lo && self->tp < arena_lo + n * slot_size) {
    own = (self->tp - arena_lo) / slot_size;
    m.add(own);
    m.flush();
  }
  for (size_t i = 0; i < n; i++) {
    if (i == own || !slot_live(i)) continue;
    if (!m.add(i)) break;
  }
  m.flush();
}
size_t arena_nslots() { return nslots.load(std::memory_order_acquire); }
G* arena_slot_g(size_t idx) { return slot_g(idx); }

uintptr_t arena_alloc_tls_only() {
  G* gp = galloc();
  if (!gp) return 0;
  gp->magic = 0;  // not a goroutine: g_from_pthread rejects it
  return gp->tp;
}

void tls::for_each_block(void (*fn)(uintptr_t tp, void* ctx), void* ctx) {
  size_t n = arena_nslots();
  for (size_t i = 0; i < n; i++) fn(arena_slot_tp(i), ctx);
  fn(tls::initial_tp(), ctx);
}

G* main_g() { return &g1; }

G* g_from_vtid(int32_t vtid) {
  if (vtid == g1.vtid && g1.magic == kGMagic) return &g1;
  int64_t idx = (int64_t)vtid - kVtidBase - 1;
  if (idx < 0 || (size_t)idx >= arena_nslots()) return nullptr;
  G* gp = slot_g((size_t)idx);
  return gp->magic == kGMagic ? gp : nullptr;
}

bool is_goshim_tp(pthread_t t) {
  if (t == 0) return false;
  uintptr_t tp = tls::tp_of_pthread((uintptr_t)t);
  if (tp == g1.tp) return true;
  if (tp < arena_lo + slot_tp) return false;
  size_t off = tp - arena_lo - slot_tp;
  return off % slot_size == 0 && off / slot_size < arena_nslots();
}

namespace {
// The goroutine slot t names (live or not), or null.
G* slot_from_pthread(pthread_t t) {
  if (t == 0) return nullptr;
  uintptr_t tp = tls::tp_of_pthread((uintptr_t)t);
  if (tp == g1.tp && g1.magic == kGMagic) return &g1;
  if (tp < arena_lo + slot_tp) return nullptr;
  size_t off = tp - arena_lo - slot_tp;
  if (off % slot_size) return nullptr;
  size_t idx = off / slot_size;
  if (idx >= arena_nslots()) return nullptr;
  G* gp = slot_g(idx);
  return gp->magic == kGMagic ? gp : nullptr;
}
}  // namespace

G* g_from_pthread(pthread_t t) {
  G* gp = slot_from_pthread(t);
  if (!gp || gp->status.load(std::memory_order_acquire) == GStatus::Idle) return nullptr;
  return gp;
}

bool thread_exited(G* gp) {
  GStatus st = gp->status.load(std::memory_order_acquire);
  return st == GStatus::Dead || st == GStatus::Idle ||
         (gp->join_state.load(std::memory_order_acquire) & kJoinExited);
}

int gone_thread_error(pthread_t t) {
  G* gp = slot_from_pthread(t);
  if (gp && gp->status.load(std::memory_order_acquire) == GStatus::Idle &&
      (gp->join_state.load(std::memory_order_acquire) & kJoinDetached))
    return EINVAL;
  return ESRCH;
}

// ---- scavenging -------------------------------------------------------------

void gfree_scavenge(int64_t now) {
  constexpr int64_t kAfterNs = 1000 * 1000 * 1000;  // idle that long on the global list
  constexpr int64_t kPeriodNs = 100 * 1000 * 1000;
  static int64_t last;
  if (!slot_stack || now - last < kPeriodNs) return;
  last = now;
  size_t pg = page_size();
  constexpr int kBatch = 256;
  G* batch[kBatch];
  for (;;) {
    int n = 0;
    sched.gflock.lock();
    // Warm Gs are newest first: if the first has been idle long enough,
    // so have all the others.
    while (n < kBatch && sched.gfree && now - sched.gfree->freed_at >= kAfterNs) {
      G* gp = sched.gfree;
      sched.gfree = gp->schedlink;
      sched.ngfree--;
      batch[n++] = gp;
    }
    sched.gflock.unlock();
    if (n == 0) return;
    // Off the lists: nobody else can take these while their pages go. The
    // stack's top partial page also holds the TLS block: it stays.
    for (int i = 0; i < n; i++) {
      Stack st = slot_stack_of(batch[i]->tp);
      uintptr_t lo = (st.lo + pg - 1) & ~(uintptr_t)(pg - 1);
      uintptr_t hi = st.hi & ~(uintptr_t)(pg - 1);
      if (hi > lo) sys::madvise((void*)lo, hi - lo, MADV_DONTNEED);
    }
    sched.gflock.lock();
    for (int i = 0; i < n; i++) {
      batch[i]->schedlink = sched.gfree_cold;
      sched.gfree_cold = batch[i];
      sched.ngfree++;
    }
    sched.gflock.unlock();
    if (n < kBatch) return;
  }
}

// ---- create ------------------------------------------------------------------

int thread_create(const CreateAttr& a, void* (*fn)(void*), void* arg, pthread_t* out) {
  // Before the process has a second goroutine (the first creation sets
  // libunwind up, on this G, in the program's context, core/dump.hpp),
  // and the privfd thread then in a fork child (core/privfd.hpp).
  dump_unwinder_init();
  privfd_before_second_goroutine();
  G* cur = getg();
  M* mp = (cur && cur->m) ? cur->m : nullptr;
  P* pp = mp ? mp->p : nullptr;

  G* gp = gfget(pp);
  bool fresh = false;
  if (!gp) {
    gp = galloc();
    if (!gp) return EAGAIN;
    fresh = true;
  }
  bool clean = !fresh && gp->started_tls && gp->block_clean;
  bool slot_stack_kept = clean && gp->block_slot_stack;
  gp->block_clean = false;
  gp->block_slot_stack = false;
  bool clean_kept = false;
  if (!tls::block_init(gp->tp, gp, fresh || !gp->started_tls, clean, &clean_kept)) {
    gp->started_tls = false;  // its TCB is zero again: start afresh next time
    gfput(pp, gp);
    return EAGAIN;
  }
  gp->started_tls = true;
  // block_init may have parked (its malloc can wait on a contended mutex):
  // the P read above may belong to another M now.
  cur = getg();
  mp = (cur && cur->m) ? cur->m : nullptr;
  pp = mp ? mp->p : nullptr;
  gp->flags = 0;
  if (a.stack_lo) {
    gp->flags |= kGFlagUserStack;
    gp->stack = Stack{a.stack_lo, a.stack_lo + a.stack_size, 0, 0, 0};
  } else {
    size_t size = a.stack_size ? a.stack_size : default_stack_size();
    size_t guard = a.guard_set ? a.guard_size : default_guard_size();
    size_t pg = page_size();
    size_t rsize = (size + pg - 1) & ~(pg - 1);
    bool page_guard = ((guard + pg - 1) & ~(pg - 1)) == pg;
    if (slot_stack && page_guard && rsize == slot_stack &&
        (gp->slot_guard_pages == 0 || slot_inner_guard(gp, 0))) {
      gp->stack = slot_stack_of(gp->tp);
      if (slot_stack_kept && clean_kept) goto stack_set;  // block_clean_at_exit did
    } else if (slot_stack && page_guard && rsize + slot_guard_bytes() <= slot_stack &&
               slot_inner_guard(gp, rsize / pg)) {
      gp->stack = slot_stack_of(gp->tp);
      gp->stack.lo = gp->stack.hi - rsize;
    } else if (!stack_alloc(pp, size, guard, &gp->stack)) {
      gfput(pp, gp);
      return EAGAIN;
    }
  }
  tls::set_stack(gp->tp, gp->stack.lo, gp->stack.hi - gp->stack.lo);
stack_set:
  gp->start_routine = fn;
  gp->start_arg = arg;
  gp->retval = nullptr;
  gp->join_state.store(a.detached ? (uint32_t)kJoinDetached : 0u, std::memory_order_relaxed);
  gp->joiner.store(nullptr, std::memory_order_relaxed);
  cputime_reset(gp);
  gp->goid = sched.goidgen.fetch_add(1, std::memory_order_relaxed) + 1;
  gp->creator_goid = cur ? cur->goid : 0;
  gp->started = false;
  gp->name[0] = 0;
  gp->sched_policy = a.sched_policy;
  gp->sched_priority = a.sched_priority;
  gp->rt_locked = false;
  gp->tid_bound = false;
  gp->rt_pp_max = 0;
  for (uint32_t& c : gp->rt_pp_count) c = 0;
  gp->rt_pending.store(false, std::memory_order_relaxed);
  RtStart rs;
  bool rt = rt_policy(a.sched_policy);
  gp->rt_start = rt ? &rs : nullptr;
  rs.creator_bound = cur && !cur->is_g0() && cur->rt_locked;
  gp->sigmask = a.has_sigmask ? a.sigmask : (cur ? cur->sigmask : 0);
  signal_g_start(gp);
  gp->sigpending.store(0, std::memory_order_relaxed);
  gp->cancel_unsignalled.store(false, std::memory_order_relaxed);
  gp->guarded_async.store(false, std::memory_order_relaxed);
  gp->preempt.store(false, std::memory_order_relaxed);
  gp->exit_called = false;
  gp->sigpending_proc.store(0, std::memory_order_relaxed);
  gp->sigwaiting.store(0, std::memory_order_relaxed);
  gp->sig_exiting.store(false, std::memory_order_relaxed);
  gp->altstack = stack_t{nullptr, SS_DISABLE, 0};
  gp->insig = 0;
  gp->delivering = false;
  gp->waitreason = WaitReason::None;
  gp->sched_sp = arch::frame_init(gp->stack.hi, g_entry, gp, arch::get_fpctl());

  *out = (pthread_t)tls::pthread_of(gp->tp);  // before the G can run, as glibc does

  int64_t live = sched.ngoroutines.fetch_add(1, std::memory_order_relaxed) + 1;
  int64_t peak = sched.ngpeak.load(std::memory_order_relaxed);
  while (live > peak && !sched.ngpeak.compare_exchange_weak(peak, live)) {
  }
  sched.ngcreated.fetch_add(1, std::memory_order_relaxed);
  trace_ev(TraceEv::GCreate, cur, gp->goid);

  gp->status.store(GStatus::Runnable, std::memory_order_release);
  // Not onto a P replaced while its M was stuck (sysmon): nobody else runs
  // that P's queue until this M gets back to the scheduler.
  if (pp && !pp->retired.load(std::memory_order_relaxed))
    runqput(pp, gp, true);
  else
    globrunqput(gp);
  wakep();
  if (rt) return rt_start_wait(&rs);  // gp may have ended already: rs only
  return 0;
}

// ---- exit ----------------------------------------------------------------------

void thread_exit_landed(bool unwound) {
  GOSHIM_ON_USER_G();
  G* gp = getg();
  // Unwound by glibc's own cancellation (not our pthread_exit): canceled.
  if (unwound && !gp->exit_called && cancel_pending_or_exiting_canceled(gp))
    gp->retval = PTHREAD_CANCELED;
  tls::on_exit();  // C++ thread_local destructors, locale
  if (g_exit_hook) g_exit_hook(gp);  // pthread key destructors
  for (auto& h : exit_hooks) {
    void (*fn)(G*) = h.load(std::memory_order_acquire);
    if (!fn) break;
    fn(gp);
  }
  signal_g_exit(gp);
  if (sched.ngoroutines.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // The last thread ended: the process exits with status 0, running
    // atexit handlers on this thread, as glibc's start_thread does.
    exit(0);
  }
  signal_g_gone();
  M* mp = gp->m;
  goshim_mcall(gp, goexit_g0, mp->g0_sp, mp->g0.tp);
  __builtin_unreachable();
}

// ---- join / detach ---------------------------------------------------------------

int thread_join(G* target, void** ret, int64_t deadline) {
  G* self = getg();
  if (self && self->is_g0()) self = nullptr;
  if (target == self) return EDEADLK;
  uint32_t s = target->join_state.load(std::memory_order_acquire);
  for (;;) {
    if (s & (kJoinDetached | kJoinJoining)) return EINVAL;
    // The target is itself waiting to join us: joining it would deadlock.
    if (self && self->joiner.load(std::memory_order_acquire) == target && !(s & kJoinExited))
      return EDEADLK;
    if (target->join_state.compare_exchange_weak(s, s | kJoinJoining, std::memory_order_acq_rel))
      break;
  }
  target->joiner.store(self, std::memory_order_release);
  s |= kJoinJoining;
  while (!(s & kJoinExited)) {
    int r = 0;
    if (deadline == -1) {
      r = EBUSY;
    } else {
      // A cancellation point for a goroutine: a cancel racing with the
      // park is not lost.
      r = sema_wait(&target->join_state, s, deadline > 0 ? deadline : 0, WaitReason::Join, ~0u,
                    nullptr, self != nullptr);
      if (r == EINTR && self && cancel_pending(self)) {
        // A cancellation point: give up the claim first, then unwind.
        target->joiner.store(nullptr, std::memory_order_release);
        target->join_state.fetch_and(~kJoinJoining, std::memory_order_acq_rel);
        cancel_point();
      }
      if (r == EAGAIN || r == 0 || r == EINTR) r = 0;
    }
    s = target->join_state.load(std::memory_order_acquire);
    if (r != 0 && !(s & kJoinExited)) {
      // Give up the claim so that a later join can succeed.
      target->joiner.store(nullptr, std::memory_order_release);
      while (!target->join_state.compare_exchange_weak(s, s & ~kJoinJoining,
                                                       std::memory_order_acq_rel)) {
      }
      if (!(s & kJoinExited)) return r;
      // Exited just now: reap it after all.
      target->join_state.fetch_or(kJoinJoining, std::memory_order_acq_rel);
      break;
    }
  }
  if (ret) *ret = target->retval;
  target->joiner.store(nullptr, std::memory_order_relaxed);
  reap(target);
  return 0;
}

int thread_detach(G* target) {
  uint32_t s = target->join_state.load(std::memory_order_acquire);
  for (;;) {
    if (s & (kJoinDetached | kJoinJoining)) return EINVAL;
    if (target->join_state.compare_exchange_weak(s, s | kJoinDetached,
                                                 std::memory_order_acq_rel))
      break;
  }
  if (s & kJoinExited) reap(target);  // a zombie: free it now
  return 0;
}

}  // namespace goshim
