// Hooks in ld.so for initial-exec TLS of dynamically loaded modules
// (LD_PRELOAD.md 7.20). glibc initializes a new module's static TLS in the
// threads on its own lists only; goroutines are not on them, and goshim
// copies the module's TLS image into their blocks itself
// (tls::after_dlopen). The moments it does so:
//
// 1. GLRO(dl_open): every dlopen of the process, the program's and libc's
//    own (NSS modules, iconv's gconv modules: __libc_dlopen_mode, which no
//    interposer sees), reaches ld.so's _dl_open through this pointer in
//    _rtld_global_ro (glibc 2.34 to 2.41: elf/dl-libc.c do_dlopen,
//    dlfcn/dlopen.c dlopen_doit). goshim replaces it, and copies when
//    _dl_open returns (or a canceled constructor unwinds out of it).
// 2. Before the new modules' constructors: ld.so takes and releases its
//    recursive locks through two pointers in its RELRO data,
//    ___rtld_mutex_lock and ___rtld_mutex_unlock (glibc 2.34 to 2.41:
//    sysdeps/nptl/dl-mutex.c sets them to libc's pthread_mutex_lock and
//    pthread_mutex_unlock). In _dl_open (elf/dl-open.c, glibc 2.35 to
//    2.41) the first lock taken is GL(dl_load_lock), the second
//    GL(dl_load_tls_lock) (dl_open_worker), released once the new modules
//    are relocated and their static TLS initialized (update_tls_slotinfo),
//    just before _dl_init runs their constructors. goshim replaces both
//    pointers, learns the second lock's address in the first _dl_open
//    (checked: in _rtld_global, two locks after the first, as
//    GL(dl_load_write_lock) lies between them), and copies when a thread
//    inside _dl_open releases it: the constructors then see their TLS, in
//    every goroutine.
// 3. GLRO(dl_close), the next word: marks the thread as inside _dl_close.
//    There ld.so takes dl_load_tls_lock right after THREAD_GSCOPE_WAIT
//    (the wait for its own threads in a symbol lookup) and before it
//    unmaps anything: goshim waits for goroutines in a symbol lookup there
//    (tls::gscope_wait, x86-64).
// 4. When ld.so releases GL(dl_load_lock) for good (a dlopen or dlclose
//    ended, or a dlopen failed and unloaded what it had mapped), the
//    module ids no longer loaded are forgotten (tls::forget_unloaded), so
//    that a module given one of them later is copied.
//
// Each pointer is found by value and checked; a hook that cannot be
// installed leaves the pointer alone (then: the dlopen interposers copy
// after the program's own dlopen calls only; no copy before constructors).
#include "core/dlhook.hpp"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>

#include <atomic>

#include "arch/arch.hpp"
#include "core/contract.hpp"
#include "core/preempt.hpp"
#include "core/rawlog.hpp"
#include "core/real.hpp"
#include "core/runtime.hpp"
#include "core/stack.hpp"
#include "core/tls.hpp"
#include "syscalls/blocking.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {
pthread_mutex_t* loader_lock();
}

void dl_after_load(void*) {
  if (!mn_active()) return;
  // Under ld.so's dl_load_lock (once learned), as libc's own dladdr takes
  // it: no dlopen of another thread is then half done (its modules listed,
  // their TLS not yet set up). Recursive: a canceled constructor leaves
  // this thread holding it, and a constructor's dlopen runs under it.
  pthread_mutex_t* a = loader_lock();
  if (a) real::lazy::pthread_mutex_lock()(a);
  tls::after_dlopen();
  if (a) real::lazy::pthread_mutex_unlock()(a);
  preempt_refresh_ranges();
}

namespace {

// ld.so's _dl_open (elf/dl-open.c): file, mode, caller_dlopen, nsid, argc,
// argv, env. The hook passes them on unchanged.
using dl_open_t = void* (*)(const char*, int, const void*, Lmid_t, int, char**, char**);
using dl_close_t = void (*)(void*);
using mutex_fn_t = int (*)(pthread_mutex_t*);
dl_open_t glibc_dl_open;  // the pointers' values before the hooks
dl_close_t glibc_dl_close;
mutex_fn_t glibc_rtld_lock, glibc_rtld_unlock;
std::atomic<bool> dl_open_hooked_{false};

// The thread's (goroutine's) _dl_open nesting depth, and the locks it took
// since entering the outermost one (the first two: learning).
__thread int dl_open_depth __attribute__((tls_model("initial-exec")));
__thread int dl_open_nlocks __attribute__((tls_model("initial-exec")));
__thread pthread_mutex_t* dl_open_locks[2] __attribute__((tls_model("initial-exec")));
__thread int dl_close_depth __attribute__((tls_model("initial-exec")));  // in _dl_close

// GL(dl_load_tls_lock) and GL(dl_load_lock), once learned and checked;
// nullptr until then.
std::atomic<pthread_mutex_t*> tls_lock{nullptr};
pthread_mutex_t* load_lock;
std::atomic<bool> tls_lock_bad{false};  // learned wrong once: never again
uintptr_t rtld_global_lo, rtld_global_hi;  // the segment holding _rtld_global

pthread_mutex_t* loader_lock() {
  if (!tls_lock.load(std::memory_order_acquire) || tls_lock_bad.load(std::memory_order_relaxed))
    return nullptr;
  return load_lock;
}

// The calling thread's id as glibc's recursive mutexes record their owner
// (the TCB's tid: a goroutine's virtual tid).
int my_tid() { return tls::get_tid(arch::get_tp()); }

// Checks the two locks a _dl_open took first (the second is being taken
// now, the first is held), and publishes them.
void learn_tls_lock(pthread_mutex_t* a, pthread_mutex_t* b) {
  uintptr_t ua = (uintptr_t)a, ub = (uintptr_t)b;
  bool ok = ua >= rtld_global_lo && ub + sizeof(pthread_mutex_t) <= rtld_global_hi &&
            ub == ua + 2 * sizeof(pthread_mutex_t) &&
            (a->__data.__kind & 3) == PTHREAD_MUTEX_RECURSIVE_NP &&
            (b->__data.__kind & 3) == PTHREAD_MUTEX_RECURSIVE_NP && a->__data.__owner == my_tid() &&
            a->__data.__count >= 1;
  if (!ok) {
    tls_lock_bad.store(true, std::memory_order_relaxed);
    return;
  }
  load_lock = a;
  pthread_mutex_t* expect = nullptr;
  if (!tls_lock.compare_exchange_strong(expect, b, std::memory_order_acq_rel) && expect != b)
    tls_lock_bad.store(true, std::memory_order_relaxed);
}

int hooked_rtld_lock(pthread_mutex_t* m) {
  if (__builtin_expect(dl_open_depth > 0 && dl_open_nlocks < 2, 0)) {
    dl_open_locks[dl_open_nlocks++] = m;
    if (dl_open_nlocks == 2 && !tls_lock.load(std::memory_order_acquire) &&
        !tls_lock_bad.load(std::memory_order_relaxed))
      learn_tls_lock(dl_open_locks[0], dl_open_locks[1]);
  }
  if (__builtin_expect(dl_close_depth > 0, 0) && m == tls_lock.load(std::memory_order_acquire) &&
      !tls_lock_bad.load(std::memory_order_relaxed) && mn_active() &&
      load_lock->__data.__owner == my_tid()) {
    // _dl_close_worker (elf/dl-close.c, glibc 2.35 to 2.41) takes
    // dl_load_tls_lock right after its THREAD_GSCOPE_WAIT and before it
    // unmaps the modules: goroutines in a symbol lookup are waited for
    // here, as glibc waited for its own threads.
    GOSHIM_NO_LOCKS("ld.so's dl_load_tls_lock taken in _dl_close");
    tls::gscope_wait();
  }
  return glibc_rtld_lock(m);
}

int hooked_rtld_unlock(pthread_mutex_t* m) {
  int r = glibc_rtld_unlock(m);
  pthread_mutex_t* tl = tls_lock.load(std::memory_order_acquire);
  if (__builtin_expect(tl != nullptr && (m == tl || m == load_lock), 0) &&
      !tls_lock_bad.load(std::memory_order_relaxed) && mn_active()) {
    // No runtime lock of goshim's may be held here (it would then be
    // ordered before the loader's lock); the leaf dlopen_lock and glibc's
    // dl_load_write_lock (dl_iterate_phdr) come after dl_load_lock, as in
    // glibc's own _dl_open.
    if (m == tl) {
      // Inside _dl_open (this thread holds GL(dl_load_lock)): the new
      // modules' static TLS is set up, their constructors not yet run.
      if (dl_open_depth > 0 && load_lock->__data.__owner == my_tid()) {
        GOSHIM_NO_LOCKS("ld.so's dl_load_tls_lock released in _dl_open");
        tls::before_ctors();
      }
    } else if (load_lock->__data.__owner != my_tid()) {
      // GL(dl_load_lock) released for good: no _dl_open or _dl_close of
      // this thread is in progress (one that failed longjmped past the
      // hook).
      dl_open_depth = 0;
      dl_close_depth = 0;
      GOSHIM_NO_LOCKS("ld.so's dl_load_lock released");
      tls::forget_unloaded();
    }
  }
  return r;
}

struct DlOpenArgs {
  const char* file;
  int mode;
  const void* caller;
  Lmid_t nsid;
  int argc;
  char** argv;
  char** env;
};

long do_dl_open(void* a) {
  auto* o = (DlOpenArgs*)a;
  return (long)glibc_dl_open(o->file, o->mode, o->caller, o->nsid, o->argc, o->argv, o->env);
}

void leave_dl_open(void*) {
  if (dl_open_depth > 0) dl_open_depth--;
  dl_after_load(nullptr);
}

// GLRO(dl_open) once hooked. _dl_open returns only on success; an error
// longjmps to libc's catcher, past this frame (the depth is reset when
// ld.so releases its dl_load_lock). The modules' constructors ran inside
// it (a canceled constructor unwinds through here: the copy runs on the
// way out).
void* hooked_dl_open(const char* file, int mode, const void* caller, Lmid_t nsid, int argc,
                     char** argv, char** env) {
  // _dl_open takes the loader's lock and runs the modules' constructors
  // (program code): no runtime lock of goshim's may be held across it.
  GOSHIM_NO_LOCKS("glibc's _dl_open");
  if (dl_open_depth == 0) dl_open_nlocks = 0;
  dl_open_depth++;
  DlOpenArgs o{file, mode, caller, nsid, argc, argv, env};
  void* h = (void*)goshim_call_undo_on_unwind(do_dl_open, &o, leave_dl_open, nullptr);
  leave_dl_open(nullptr);
  return h;
}

// GLRO(dl_close) once hooked: marks the thread as inside _dl_close (an
// error there longjmps past this frame: the depth is reset when ld.so
// releases its dl_load_lock).
void hooked_dl_close(void* map) {
  GOSHIM_NO_LOCKS("glibc's _dl_close");
  dl_close_depth++;
  glibc_dl_close(map);
  dl_close_depth--;
}

// ld.so's segments.
struct LdsoSegs {
  uintptr_t addr;   // in: an address in ld.so's data (_rtld_global_ro)
  uintptr_t code;   // in: an address in ld.so's code (_dl_mcount)
  uintptr_t data2;  // in: another address in ld.so's data (_rtld_global)
  bool found;
  uintptr_t text_lo, text_hi;    // the executable PT_LOAD holding code
  uintptr_t seg_lo, seg_hi;      // the PT_LOAD holding addr
  int seg_prot;                  // its protection after start-up (RELRO: read-only)
  uintptr_t relro_lo, relro_hi;  // PT_GNU_RELRO
  uintptr_t data2_lo, data2_hi;  // the PT_LOAD holding data2
};

int prot_of(const ElfW(Phdr)& ph) {
  return ((ph.p_flags & PF_R) ? PROT_READ : 0) | ((ph.p_flags & PF_W) ? PROT_WRITE : 0) |
         ((ph.p_flags & PF_X) ? PROT_EXEC : 0);
}

int find_segs(struct dl_phdr_info* info, size_t, void* ctx) {
  auto* s = (LdsoSegs*)ctx;
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (ph.p_type == PT_LOAD && s->addr >= lo && s->addr < hi) holds = true;
  }
  if (!holds) return 0;
  s->found = true;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && s->code >= lo && s->code < hi) {
      s->text_lo = lo;
      s->text_hi = hi;
    }
    if (ph.p_type == PT_LOAD && s->addr >= lo && s->addr < hi) {
      s->seg_lo = lo;
      s->seg_hi = hi;
      s->seg_prot = prot_of(ph);
    }
    if (ph.p_type == PT_LOAD && s->data2 >= lo && s->data2 < hi) {
      s->data2_lo = lo;
      s->data2_hi = hi;
    }
    if (ph.p_type == PT_GNU_RELRO) {
      s->relro_lo = lo;
      s->relro_hi = hi;
    }
  }
  return 1;
}

// Stores v at slot, a word of ld.so's data whose protection is prot.
bool store_word(uintptr_t* slot, uintptr_t v, int prot) {
  uintptr_t page = page_size();
  uintptr_t plo = (uintptr_t)slot & ~(page - 1);
  if (sys::mprotect((void*)plo, page, prot | PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, v, __ATOMIC_RELEASE);
  if ((prot & PROT_WRITE) == 0 && sys::mprotect((void*)plo, page, prot) != 0)
    rawlog("goshim: warning: cannot make ld.so's data read-only again\n");
  return true;
}

// The one word in [lo, hi) holding v, or nullptr (none or several).
uintptr_t* unique_word(uintptr_t lo, uintptr_t hi, uintptr_t v) {
  uintptr_t* found = nullptr;
  for (uintptr_t p = (lo + 7) & ~(uintptr_t)7; p + 8 <= hi; p += 8) {
    if (*(const uintptr_t*)p != v) continue;
    if (found) return nullptr;
    found = (uintptr_t*)p;
  }
  return found;
}

}  // namespace

// Finds GLRO(dl_open) and GLRO(dl_close) by value and hooks them, then
// ___rtld_mutex_lock/_unlock. The layout of _rtld_global_ro is
// glibc-private; from glibc 2.34 to 2.41 its table of entry points for
// libc reads (sysdeps/generic/ldsodefs.h, elf/rtld.c): _dl_debug_printf,
// _dl_mcount, _dl_lookup_symbol_x, _dl_open, _dl_close, _dl_catch_error,
// every one a function of ld.so. The table is used only if exactly one
// word in the first 4 KiB of _rtld_global_ro holds the address of the
// public _dl_mcount and the words around it are five distinct pointers
// into ld.so's code. The lock pointers are used only if exactly one word
// of ld.so's RELRO data holds libc's pthread_mutex_lock, and one
// pthread_mutex_unlock. Once, at start-up (M:N only).
bool install_dl_open_hook(const char** why) {
  char* rgro = real::lazy::_rtld_global_ro();
  char* rg = real::lazy::_rtld_global();
  auto mcount = real::lazy::_dl_mcount();
  if (!rgro || !rg || !mcount) {
    *why = "_rtld_global_ro, _rtld_global or _dl_mcount not found";
    return false;
  }
  LdsoSegs s{};
  s.addr = (uintptr_t)rgro;
  s.code = (uintptr_t)mcount;
  s.data2 = (uintptr_t)rg;
  dl_iterate_phdr(find_segs, &s);
  if (!s.found || !s.text_lo || !s.seg_lo || !s.data2_lo) {
    *why = "_dl_mcount and _rtld_global are not in the object defining _rtld_global_ro";
    return false;
  }
  uintptr_t lo = ((uintptr_t)rgro + 7) & ~(uintptr_t)7;
  uintptr_t hi = (uintptr_t)rgro + 4096;
  if (hi > s.seg_hi) hi = s.seg_hi;
  auto in_text = [&](uintptr_t v) { return v >= s.text_lo && v < s.text_hi; };
  uintptr_t* slot = nullptr;
  int hits = 0;
  for (uintptr_t p = lo + 8; p + 5 * 8 <= hi; p += 8) {
    const uintptr_t* w = (const uintptr_t*)p;
    if (w[0] != (uintptr_t)mcount) continue;
    uintptr_t f[5] = {w[-1], w[1], w[2], w[3], w[4]};
    bool ok = true;
    for (int i = 0; i < 5 && ok; i++) {
      if (!in_text(f[i]) || f[i] == (uintptr_t)mcount) ok = false;
      for (int j = 0; j < i && ok; j++)
        if (f[i] == f[j]) ok = false;
    }
    if (!ok) continue;
    hits++;
    slot = (uintptr_t*)(p + 16);
  }
  if (hits != 1) {
    *why = hits ? "_dl_mcount appears more than once in _rtld_global_ro"
                : "the entry-point table is not where glibc 2.34-2.41 has it in _rtld_global_ro";
    return false;
  }
  bool in_relro = s.relro_lo && (uintptr_t)slot >= s.relro_lo && (uintptr_t)slot < s.relro_hi;
  int prot = in_relro ? PROT_READ : s.seg_prot;
  glibc_dl_open = (dl_open_t)slot[0];
  glibc_dl_close = (dl_close_t)slot[1];
  if (!store_word(&slot[1], (uintptr_t)&hooked_dl_close, prot)) {
    *why = "cannot make _rtld_global_ro writable";
    return false;
  }
  dl_open_hooked_.store(true, std::memory_order_release);
  if (!store_word(&slot[0], (uintptr_t)&hooked_dl_open, prot)) {
    dl_open_hooked_.store(false, std::memory_order_release);
    *why = "cannot make _rtld_global_ro writable";
    return false;
  }

  // ___rtld_mutex_lock/_unlock: the copy before constructors.
  auto lockf = real::lazy::pthread_mutex_lock();
  auto unlockf = real::lazy::pthread_mutex_unlock();
  if (!lockf || !unlockf || !s.relro_lo) return true;
  uintptr_t* lslot = unique_word(s.relro_lo, s.relro_hi, (uintptr_t)lockf);
  uintptr_t* uslot = unique_word(s.relro_lo, s.relro_hi, (uintptr_t)unlockf);
  if (!lslot || !uslot) return true;
  rtld_global_lo = s.data2_lo;
  rtld_global_hi = s.data2_hi;
  glibc_rtld_lock = (mutex_fn_t)*lslot;
  glibc_rtld_unlock = (mutex_fn_t)*uslot;
  // The unlock hook first: it only acts once the lock hook has learned.
  if (store_word(uslot, (uintptr_t)&hooked_rtld_unlock, PROT_READ))
    store_word(lslot, (uintptr_t)&hooked_rtld_lock, PROT_READ);
  return true;
}

bool dl_open_hooked() { return dl_open_hooked_.load(std::memory_order_acquire); }

}  // namespace goshim
