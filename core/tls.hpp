// Per-goroutine glibc TLS blocks (DESIGN.md decision 2, TLS.md).
//
// Every G owns a full glibc static TLS block and TCB (struct pthread),
// allocated by glibc's own allocator (_dl_allocate_tls) inside goshim's G
// arena and recycled with the G. The thread pointer moves with the G, so
// errno, __thread, thread_local, stdio lock ownership, malloc caches and the
// stack protector behave as for a kernel thread.
//
// Offsets into struct pthread are found at run time from glibc's
// libthread_db descriptors and a probe thread; tcbhead_t offsets are a
// fixed ABI. tls::init refuses (returns false) when any check fails, and
// goshim then runs every thread as a plain kernel thread.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace goshim {
struct G;
}

namespace goshim::tls {

struct Layout {
  size_t static_size = 0;   // _dl_get_tls_static_info: static TLS + TCB
  size_t static_align = 0;
  size_t sizeof_pthread = 0;
  // The block around a thread pointer: [tp - below_tp, tp + above_tp).
  // Variant II (x86-64): static TLS below tp, struct pthread at tp.
  // Variant I (aarch64): struct pthread below tp, the 16-byte tcbhead and
  // static TLS above it.
  size_t below_tp = 0;
  size_t above_tp = 0;
  // struct pthread's address relative to tp (THREAD_SELF = tp + pd): 0 in
  // variant II, -sizeof(struct pthread) in variant I (modular arithmetic).
  size_t pd = 0;
  // struct pthread offsets, relative to tp (pd added: tp + L.tid is the tid)
  size_t list = 0, tid = 0, robust_prev = 0, robust_head = 0, cleanup_jmp_buf = 0,
         cancelhandling = 0, specific_1stblock = 0, specific = 0, report_events = 0,
         stackblock = 0, stackblock_size = 0, res = 0;
  // specific_used (glibc's "a value was stored" flag, just after specific[]),
  // relative to tp; valid when keys_region is set: the probe saw glibc's
  // pthread_setspecific set it and specific[] follow specific_1stblock.
  size_t specific_used = 0;
  bool keys_region = false;
  // TLS offsets relative to tp (negative on x86-64, positive on aarch64)
  intptr_t resp = 0;        // glibc's __resp
  intptr_t tls_g = 0;       // goshim's tls_g
  intptr_t rseq = 0;        // __rseq_offset
  uint32_t rseq_size = 0;   // __rseq_size (feature size); 0 when registration failed
  bool rseq_area = false;   // __rseq_offset is known (the area exists, registered or not)
  uint32_t rseq_reglen = 0; // the length glibc registered with the kernel
};

extern Layout L;

// What init's probe thread saw (a real kernel thread on a stack goshim
// supplies, with glibc's full start_thread setup). check_probe compares it
// with what the recipe expects; tests/unit/tls_test.cpp feeds it altered
// copies of a real probe to see every mismatch refused.
struct Probe {
  uintptr_t stack_lo = 0;
  size_t stack_size = 0;
  uintptr_t self = 0;
  int32_t tid = 0;
  uintptr_t robust_head = 0;
  intptr_t futex_offset = 0;
  uintptr_t res = 0;
  uintptr_t resp_tls = 0;
  uintptr_t tls_g_addr = 0;
  size_t stackblock = 0;
  int stackblock_hits = 0;
  uintptr_t cleanup_jmp_buf_val = 0;
  uintptr_t specific0 = 0;
  uintptr_t list_next = 0;
  int multiple_threads = 0;
  uintptr_t tcb_self0 = 0, tcb_self = 0;  // tcbhead_t.tcb and .self
  uintptr_t stack_guard = 0, pointer_guard = 0;
  uintptr_t robust_prev = 0;               // the word below robust_head
  uint32_t rseq_cpu_id = 0;                // the rseq area's cpu_id at start
  uint32_t rseq_reglen = 0;                // the length that unregistered it
  bool rseq_unregister_failed = false;
  // cancelhandling as glibc's public calls leave it: at the start, after
  // pthread_setcanceltype(ASYNCHRONOUS) (then back to DEFERRED), after
  // pthread_setcancelstate(DISABLE), after ENABLE again; and in the joined
  // thread's TCB after it ended (EXITING).
  int ch_start = -1, ch_async = -1, ch_disabled = -1, ch_enabled = -1, ch_joined = -1;
  // Cancellation's unwinding as goshim uses it: with the bits goshim's
  // pthread_cancel sets (CANCELING | CANCELED), glibc's pthread_testcancel
  // must unwind to the buffer goshim put in cleanup_jmp_buf (landed), not
  // return (returned).
  bool cancel_landed = false, cancel_returned = false;
  // The byte after specific[] before and after glibc's own
  // pthread_setspecific stored a value (-1: not looked at).
  int specific_used_before = -1, specific_used_after = -1;
};
extern Probe last_probe;  // init's probe (for tests)

// The checks init makes of a probe (and of the initial thread's TCB);
// fills L's probed offsets. nullptr when every check passes, else why not.
const char* check_probe(const Probe& pr);

// Discovers the layout and checks the recipe. On the initial thread, before
// any G exists. Returns false (with *why set) when M:N must not start.
bool init(const char** why);

// Bytes one block needs, counted from its 64-aligned base; tp is at
// base + L.below_tp.
inline size_t block_bytes() { return L.below_tp + L.above_tp; }

// pthread_t (struct pthread's address) <-> thread pointer.
inline uintptr_t pthread_of(uintptr_t tp) { return tp + L.pd; }
inline uintptr_t tp_of_pthread(uintptr_t pd) { return pd - L.pd; }

// Initializes the block whose thread pointer is tp for gp, which must carry
// its vtid. fresh: never used (zero memory, glibc allocates the DTV);
// otherwise a recycled block, brought back to the state of a new thread.
// Returns false if glibc cannot allocate the DTV (the caller reports
// EAGAIN). On user G or g0, no runtime locks held (may malloc).
// clean: a recycled block that block_clean_at_exit brought back already
// (nothing of the block is read or written then but report_events when
// the initial thread's is set, and cancelhandling when gp->cancel_marked).
// *clean_kept (if given) tells whether block_init kept such a block as it
// was (not when a module with dynamic TLS was loaded since: glibc's path
// then, which clears everything, the stack fields too).
bool block_init(uintptr_t tp, G* gp, bool fresh = true, bool clean = false,
                bool* clean_kept = nullptr);

// At a G's exit, on g0 (the block is no longer in use, and still in this
// CPU's cache): brings the block back to a new thread's static TLS images
// and a zeroed TCB, so that the next block_init on it writes only the
// per-thread fields. Returns false (nothing done) once a module with
// dynamic TLS is loaded (glibc's path then). No locks, no malloc.
// Also writes the fields block_init writes alike for every thread of the
// block (its G gp's, the tid included: a slot's threads all have its G's
// vtid), so that block_init(clean) has only report_events to write; and
// the stack (lo, size) unless lo is 0, which the next thread must then set
// (set_stack).
bool block_clean_at_exit(uintptr_t tp, G* gp, uintptr_t stack_lo = 0, size_t stack_size = 0);

// Records the stack in the TCB (pthread_getattr_np, alloca cutoff, unwinder).
void set_stack(uintptr_t tp, uintptr_t lo, size_t size);
// Reads/writes TCB fields goshim needs.
void set_cleanup_jmp_buf(uintptr_t tp, void* buf);
void* get_cleanup_jmp_buf(uintptr_t tp);
int32_t get_tid(uintptr_t tp);
void set_tid(uintptr_t tp, int32_t tid);
void** specific_slot(uintptr_t tp, unsigned idx1st);  // &specific[idx1st]
void* specific_1stblock(uintptr_t tp);
// Set in a block once anything was stored with pthread_setspecific there
// (shim/pthread_key.cpp key_set). jemalloc initializes its thread state
// (je_tsd_tls, the .tdata of goshim's own TLS module, 2.6 KB) only
// together with storing its key's value, so while this is clear that
// image is still pristine and a recycled block need not copy it again.
extern __thread bool keys_stored __attribute__((tls_model("initial-exec")));
// Called by libgoshim.so: its TLS module's .tdata is jemalloc's thread state
// and nothing else, so the above applies to it.
void own_tdata_is_allocator_state();

// Writes goshim's tls_g in another block.
void set_tls_g(uintptr_t tp, G* gp);

// On the G, on its first run (what start_thread does before user code).
void first_run();
// On the G, as it exits (after destructors, before the block is pooled).
void on_exit();

// The initial thread's TCB (T0): main keeps it.
uintptr_t initial_tp();
// Prepares T0 for running main as G1 (virtual tid, multiple_threads).
void adopt_main(G* g1);
// On the initial kernel thread, after it switched to its g0 block s0:
// moves the kernel's rseq, robust-list and clear-tid registrations from T0
// to s0 so that K0's kernel state no longer points into main's block.
void move_kernel_registrations(uintptr_t s0);

// In a fork child (fork.hpp).
void after_fork();

// After a successful dlopen: copies the initial-exec TLS image of every
// newly loaded module into every live goroutine block. Any thread; no
// runtime lock held (ld.so's dl_load_lock may be: a constructor's dlopen).
void after_dlopen();
// Inside _dl_open, once glibc initialized the new modules' static TLS and
// before their constructors (core/dlhook.cpp): the same, for the modules
// whose TLS glibc has initialized in the initial thread's block (T0, on
// glibc's own list), compared byte for byte with their image; the others
// are left to after_dlopen. Holding ld.so's dl_load_lock.
void before_ctors();
// Inside _dl_close, after glibc waited for the threads on its lists that
// are in a symbol lookup and before it unmaps anything (core/dlhook.cpp):
// waits the same way for every goroutine but the caller (the TCB's
// gscope_flag, THREAD_GSCOPE_WAIT's protocol). x86-64 only (a fixed
// tcbhead_t field); nothing elsewhere. Holding ld.so's dl_load_lock.
void gscope_wait();
// After ld.so released its dl_load_lock (a dlopen or dlclose ended, or
// failed): forgets the module ids no longer loaded, so that a module given
// one of them later is copied. Any thread; no lock held.
void forget_unloaded();

// Iterates all goroutine blocks (for after_dlopen); provided by proc.cpp.
void for_each_block(void (*fn)(uintptr_t tp, void* ctx), void* ctx);

}  // namespace goshim::tls
