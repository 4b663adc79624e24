// Thread-specific data: pthread_key_create/delete, pthread_get/setspecific.
//
// Values live where glibc keeps them, in the calling thread's TCB
// (specific_1stblock and the specific[] second level), so they are per
// goroutine (each G has its own TCB) and per kernel thread alike. The key
// table is goshim's own: glibc's __pthread_keys and __nptl_deallocate_tsd
// are not exported, so goshim runs the destructors itself, at goroutine
// exit (g_exit_hook) and, for foreign kernel threads, from a destructor of
// one glibc key that goshim registers for that purpose.
//
// The program has all PTHREAD_KEYS_MAX keys to itself, as natively:
// - keys created from inside libgoshim.so (jemalloc's) are numbered past
//   PTHREAD_KEYS_MAX and their values live in a __thread array (per
//   goroutine and per kernel thread alike, like the TCB slots);
// - the TCB slot of goshim's glibc key holds glibc's value for that key,
//   so the program key with the same index keeps its values in a __thread
//   slot instead.
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <threads.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.hpp"
#include "core/tcb.hpp"
#include "core/proc.hpp"
#include "core/tls.hpp"
#include "core/mcache.hpp"
#include "core/rawlog.hpp"
#include "core/real.hpp"
#include "shim/shim.hpp"

using namespace goshim;

namespace {

constexpr unsigned kKeysMax = PTHREAD_KEYS_MAX;  // 1024
constexpr unsigned k2ndSize = 32;
constexpr unsigned k1stSize = kKeysMax / k2ndSize;
constexpr int kDestructorIterations = PTHREAD_DESTRUCTOR_ITERATIONS;
// goshim's own keys: jemalloc's tsd key is the only one (tsd_boot), so 4
// leave room. Their values are in static TLS (internal_vals), which every
// goroutine's slot carries between tp and its stack: 64 bytes fewer there
// move the stack's top 64 bytes up, and a parked goroutine's frames then
// stay in the slot's two pages up to 1,024 bytes instead of 960
// (bench/RESULTS.md, "The static TLS route, page by page").
constexpr unsigned kInternalKeys = 4;

struct KeyData {
  uintptr_t seq;
  void* data;
};

struct KeyEnt {
  std::atomic<uintptr_t> seq{0};  // odd: in use
  void (*destr)(void*) = nullptr;
};

KeyEnt keys[kKeysMax + kInternalKeys];

// Where glibc keeps the values in a TCB. Found on first use (jemalloc
// creates its key long before goshim's runtime starts), without a lock:
// every thread that finds it computes the same offsets. A glibc without
// libthread_db's descriptor in libc (before 2.34, where goshim refuses M:N
// and every thread is a kernel thread) has no known TCB layout
// (Layout::None): the values then live in __thread blocks of the same
// shape instead. The key table stays goshim's in both cases: passing the
// program's calls through to glibc would hand it one key fewer than
// natively (the allocator's key and goshim's helper key take glibc's).
enum class Layout : int { Unknown, Ready, None };
std::atomic<Layout> layout{Layout::Unknown};
size_t off_specific = 0;  // struct pthread::specific
size_t off_first = 0;     // struct pthread::specific_1stblock

// Set by any pthread_setspecific: a destructor round stored new values.
__thread bool tsd_used __attribute__((tls_model("initial-exec")));
// This thread has stored a value at some time (else there is nothing to
// destroy at its exit).
__thread bool tsd_ever __attribute__((tls_model("initial-exec")));
// This foreign kernel thread has goshim's helper key armed.
__thread bool helper_armed __attribute__((tls_model("initial-exec")));

pthread_key_t helper_key;
std::atomic<int> helper_state{0};  // 0 none, 1 creating, 2 ready, 3 unavailable

// Values of the internal keys, and of the program key whose TCB slot
// goshim's glibc key occupies.
__thread KeyData internal_vals[kInternalKeys] __attribute__((tls_model("initial-exec")));
__thread KeyData helper_twin __attribute__((tls_model("initial-exec")));

extern "C" const char __ehdr_start[] __attribute__((visibility("hidden")));

// The caller's code is libgoshim.so's own (jemalloc, linked in).
bool from_goshim(const void* ra) {
  static std::atomic<uintptr_t> lo{0}, hi{0};
  uintptr_t l = lo.load(std::memory_order_acquire), h = hi.load(std::memory_order_acquire);
  if (!h) {
    const Elf64_Ehdr* eh = (const Elf64_Ehdr*)__ehdr_start;
    const Elf64_Phdr* ph = (const Elf64_Phdr*)(__ehdr_start + eh->e_phoff);
    l = UINTPTR_MAX;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
      if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X)) continue;
      uintptr_t a = (uintptr_t)__ehdr_start + ph[i].p_vaddr;
      if (a < l) l = a;
      if (a + ph[i].p_memsz > h) h = a + ph[i].p_memsz;
    }
    lo.store(l, std::memory_order_relaxed);
    hi.store(h, std::memory_order_release);
  }
  return (uintptr_t)ra >= l && (uintptr_t)ra < h;
}

// key names a key the caller may use: a program key, or an internal key
// used from libgoshim.so.
inline bool key_valid(pthread_key_t key, const void* ra) {
  return key < kKeysMax || (key < kKeysMax + kInternalKeys && from_goshim(ra));
}

// The resolver takes no lock and allocates nothing (core/real.hpp): this
// runs inside jemalloc's boot, whose first pthread_key_create comes here.
Layout init_layout() {
  const uint32_t* d = real::lazy::_thread_db_pthread_specific();
  // Variant I (aarch64): struct pthread below tp needs its size as well.
  if (!d || (arch::kTlsVariantI && tcb::pd_from_tp() == 0)) {
    layout.store(Layout::None, std::memory_order_release);
    return Layout::None;
  }
  size_t spec = d[2] + tcb::pd_from_tp();  // relative to tp
  uintptr_t tp = arch::get_tp();
  size_t first = *(uintptr_t*)(tp + spec) - tp;
  __atomic_store_n(&off_specific, spec, __ATOMIC_RELAXED);
  __atomic_store_n(&off_first, first, __ATOMIC_RELAXED);
  layout.store(Layout::Ready, std::memory_order_release);
  return Layout::Ready;
}

// Layout::None: the calling kernel thread's values (glibc's two levels),
// allocated at its first value (static TLS is every thread's cost) and
// freed after its destructors ran.
struct NoneBlock {
  KeyData first[k2ndSize];
  KeyData* l1[k1stSize];
};
__thread NoneBlock* none_block __attribute__((tls_model("initial-exec")));

inline Layout get_layout() {
  Layout l = layout.load(std::memory_order_acquire);
  if (__builtin_expect(l == Layout::Unknown, 0)) l = init_layout();
  return l;
}

// The calling thread's two levels (tp is the caller's thread pointer).
// False: none yet (Layout::None, and alloc false or no memory).
inline bool blocks(uintptr_t tp, bool alloc, KeyData** first, KeyData*** l1) {
  if (layout.load(std::memory_order_relaxed) == Layout::None) {
    NoneBlock* nb = none_block;
    if (!nb) {
      if (!alloc) return false;
      nb = (NoneBlock*)calloc(1, sizeof(NoneBlock));
      if (!nb) return false;
      none_block = nb;
    }
    *first = nb->first;
    *l1 = nb->l1;
    return true;
  }
  *first = (KeyData*)(tp + off_first);
  *l1 = (KeyData**)(tp + off_specific);
  return true;
}

// The calling thread's slot for key (tp is the caller's thread pointer).
KeyData* slot(uintptr_t tp, unsigned key, bool alloc) {
  if (key >= kKeysMax) return &internal_vals[key - kKeysMax];
  if (key == helper_key && helper_state.load(std::memory_order_acquire) == 2) return &helper_twin;
  KeyData* first;
  KeyData** l1;
  if (!blocks(tp, alloc, &first, &l1)) return nullptr;
  if (key < k2ndSize) return first + key;
  KeyData* l2 = l1[key / k2ndSize];
  if (!l2) {
    if (!alloc) return nullptr;
    l2 = (KeyData*)calloc(k2ndSize, sizeof(KeyData));
    if (!l2) return nullptr;
    l1[key / k2ndSize] = l2;
  }
  return &l2[key % k2ndSize];
}

// Runs key's destructor on the value in d, if any (one round's step).
inline void destroy_one(KeyData* d, unsigned key) {
  void* data = d->data;
  if (!data) return;
  d->data = nullptr;
  uintptr_t seq = keys[key].seq.load(std::memory_order_acquire);
  if (d->seq == seq && (seq & 1) && keys[key].destr) keys[key].destr(data);
}

// Runs the destructors of the calling thread's values (glibc's
// __nptl_deallocate_tsd) and frees its second-level blocks. goshim's own
// keys (the allocator's) first, then the program's in index order.
void run_destructors(uintptr_t tp) {
  if (layout.load(std::memory_order_acquire) == Layout::Unknown || !tsd_ever) return;
  KeyData* first = nullptr;
  KeyData** l1 = nullptr;
  int round = 0;
  bool again;
  do {
    tsd_used = false;
    again = false;
    bool twin = helper_state.load(std::memory_order_acquire) == 2;
    for (unsigned i = 0; i < kInternalKeys; i++) destroy_one(&internal_vals[i], kKeysMax + i);
    bool have = blocks(tp, false, &first, &l1);  // a destructor may have made them
    for (unsigned i = 0; i < k1stSize; i++) {
      KeyData* l2 = !have ? nullptr : i == 0 ? first : l1[i];
      for (unsigned j = 0; j < k2ndSize; j++) {
        unsigned key = i * k2ndSize + j;
        if (twin && key == helper_key) destroy_one(&helper_twin, key);
        else if (l2) destroy_one(&l2[j], key);
      }
    }
    again = tsd_used;
  } while (again && ++round < kDestructorIterations);
  memset(internal_vals, 0, sizeof internal_vals);
  helper_twin = KeyData{};
  if (blocks(tp, false, &first, &l1)) {
    memset(first, 0, k2ndSize * sizeof(KeyData));
    for (unsigned i = 1; i < k1stSize; i++) {
      if (l1[i]) {
        free(l1[i]);
        l1[i] = nullptr;
      }
    }
    if (NoneBlock* nb = none_block) {
      none_block = nullptr;
      free(nb);
    }
  }
  tsd_used = false;
}

void g_exit_keys(G* gp) { run_destructors(gp->tp); }

// Destructor of goshim's glibc key: runs at a foreign kernel thread's exit.
// Its allocator cache stays as it is from here on (jemalloc's destructor
// is among these: core/mcache.hpp).
void helper_destructor(void*) {
  thread_cache_exiting();
  run_destructors(arch::get_tp());
}

// Reserves goshim's glibc key before goshim hands out any key, so that
// their indexes (which share the TCB's value slots) never collide.
void ensure_helper() {
  int s = helper_state.load(std::memory_order_acquire);
  if (s >= 2) return;
  int zero = 0;
  if (helper_state.compare_exchange_strong(zero, 1, std::memory_order_acq_rel)) {
    auto real_create = real::lazy::pthread_key_create();
    if (real_create && real_create(&helper_key, helper_destructor) == 0 &&
        helper_key < kKeysMax) {
      // Its TCB slot is glibc's; the program key with its index uses helper_twin.
      helper_state.store(2, std::memory_order_release);
    } else {
      helper_state.store(3, std::memory_order_release);
    }
    g_exit_hook = g_exit_keys;
    return;
  }
  while (helper_state.load(std::memory_order_acquire) < 2) arch::cpu_relax();
}

void arm_helper() {
  if (helper_armed || helper_state.load(std::memory_order_acquire) != 2) return;
  auto real_set = real::lazy::pthread_setspecific();
  if (real_set && real_set(helper_key, (void*)1) == 0) helper_armed = true;
}

}  // namespace

namespace {

int key_create(pthread_key_t* key, void (*destr)(void*), bool internal) {
  get_layout();
  ensure_helper();
  unsigned first = internal ? kKeysMax : 0, end = internal ? kKeysMax + kInternalKeys : kKeysMax;
  for (unsigned i = first; i < end; i++) {
    uintptr_t seq = keys[i].seq.load(std::memory_order_relaxed);
    if ((seq & 1) == 0 && seq + 2 > seq &&
        keys[i].seq.compare_exchange_strong(seq, seq + 1, std::memory_order_acq_rel)) {
      keys[i].destr = destr;
      *key = i;
      return 0;
    }
  }
  return EAGAIN;
}

int key_delete(pthread_key_t key, const void* ra) {
  get_layout();
  if (!key_valid(key, ra)) return EINVAL;
  uintptr_t seq = keys[key].seq.load(std::memory_order_relaxed);
  if (!(seq & 1) || !keys[key].seq.compare_exchange_strong(seq, seq + 1)) return EINVAL;
  return 0;
}

void* key_get(pthread_key_t key, const void* ra) {
  get_layout();
  if (!key_valid(key, ra)) return nullptr;
  KeyData* d = slot(arch::get_tp(), key, false);
  if (!d) return nullptr;
  void* v = d->data;
  if (v && d->seq != keys[key].seq.load(std::memory_order_relaxed)) v = d->data = nullptr;
  return v;
}

int key_set(pthread_key_t key, uintptr_t value, const void* ra) {
  // First: the allocator's thread state is written before its key is set,
  // and stays written if storing the value fails (tls::keys_stored).
  tls::keys_stored = true;
  get_layout();
  if (!key_valid(key, ra)) return EINVAL;
  uintptr_t seq = keys[key].seq.load(std::memory_order_relaxed);
  if (!(seq & 1)) return EINVAL;
  KeyData* d = slot(arch::get_tp(), key, true);
  if (!d) return ENOMEM;
  d->seq = seq;
  d->data = (void*)value;
  tsd_used = true;
  tsd_ever = true;
  // A kernel thread that is not a goroutine: a foreign thread, or an M or
  // sysmon on its own TCB (g0). Its values are destroyed when it exits
  // (an M retired by sysmon ends with pthread_exit): without that, the
  // allocator's per-thread cache stayed linked into its arena from a TCB
  // that glibc then unmapped or reused for the next thread.
  if (value && (!tls_g || tls_g->is_g0())) arm_helper();
  return 0;
}

}  // namespace

// Keys created from libgoshim.so itself (jemalloc) are internal.
GOSHIM_EXPORT int pthread_key_create(pthread_key_t* key, void (*destr)(void*)) {
  return key_create(key, destr, from_goshim(__builtin_return_address(0)));
}

GOSHIM_EXPORT int pthread_key_delete(pthread_key_t key) {
  return key_delete(key, __builtin_return_address(0));
}

// libgoshim.so's own .tdata is je_tsd_tls only (the Makefile checks it).
__attribute__((constructor)) static void note_own_tdata() { tls::own_tdata_is_allocator_state(); }

GOSHIM_EXPORT void* pthread_getspecific(pthread_key_t key) {
  return key_get(key, __builtin_return_address(0));
}

GOSHIM_EXPORT int pthread_setspecific(pthread_key_t key, const void* value) {
  return key_set(key, (uintptr_t)value, __builtin_return_address(0));
}

// C11 thread-specific storage. glibc implements tss_* on its internal
// __pthread_key_* functions, which would allocate from glibc's key table
// while writing the same per-thread slots as the keys above: both kinds
// share goshim's table instead (and tss destructors run at G exit).
GOSHIM_EXPORT int tss_create(tss_t* key, tss_dtor_t destr) {
  pthread_key_t k;
  if (key_create(&k, destr, false) != 0) return thrd_error;
  *key = (tss_t)k;
  return thrd_success;
}

GOSHIM_EXPORT void tss_delete(tss_t key) { key_delete((pthread_key_t)key, nullptr); }

GOSHIM_EXPORT void* tss_get(tss_t key) { return key_get((pthread_key_t)key, nullptr); }

GOSHIM_EXPORT int tss_set(tss_t key, void* value) {
  return key_set((pthread_key_t)key, (uintptr_t)value, nullptr) == 0 ? thrd_success : thrd_error;
}
