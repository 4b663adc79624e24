// The GLRO(dl_open) hook: every dlopen of the process, the program's and
// libc's own (NSS modules, iconv's gconv modules: __libc_dlopen_mode, which
// no interposer sees), reaches ld.so's _dl_open through one pointer,
// GLRO(dl_open) in _rtld_global_ro (glibc 2.34 to 2.41: elf/dl-libc.c
// do_dlopen, dlfcn/dlopen.c dlopen_doit, both through it). goshim replaces
// that pointer and copies the new modules' initial-exec TLS into every
// goroutine's block (tls::after_dlopen) when _dl_open returns, before
// libc's caller (iconv_open, getpwnam) runs the module's code. Without the
// hook (the pointer not found as expected) the dlopen interposers
// (shim/dlopen.cpp) do it, for the program's own dlopen calls only.
#include "core/dlhook.hpp"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>

#include <atomic>

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

void dl_after_load(void*) {
  if (mn_active()) {
    tls::after_dlopen();
    preempt_refresh_ranges();
  }
}

namespace {

// ld.so's _dl_open (elf/dl-open.c): file, mode, caller_dlopen, nsid, argc,
// argv, env. The hook passes all seven on unchanged.
using dl_open_t = void* (*)(const char*, int, const void*, Lmid_t, int, char**, char**);
dl_open_t glibc_dl_open;               // the pointer's value before the hook
std::atomic<bool> dl_open_hooked_{false};

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

// GLRO(dl_open) once hooked. _dl_open returns only on success (an error
// longjmps to libc's catcher, past this frame: nothing was loaded then);
// the modules' constructors ran inside it (a canceled constructor unwinds
// through here: the copy runs on the way out).
void* hooked_dl_open(const char* file, int mode, const void* caller, Lmid_t nsid, int argc,
                     char** argv, char** env) {
  // _dl_open takes the loader's lock and runs the modules' constructors
  // (program code): no runtime lock of goshim's may be held across it.
  GOSHIM_NO_LOCKS("glibc's _dl_open");
  DlOpenArgs o{file, mode, caller, nsid, argc, argv, env};
  void* h = (void*)goshim_call_undo_on_unwind(do_dl_open, &o, dl_after_load, nullptr);
  dl_after_load(nullptr);
  return h;
}

// The object (ld.so) whose loaded segments hold addr: its executable
// segment and the segment holding addr (with its protection as loaded).
struct LdsoSegs {
  uintptr_t addr;
  bool found;
  uintptr_t text_lo, text_hi;  // the executable PT_LOAD holding _dl_mcount
  uintptr_t seg_lo, seg_hi;    // the PT_LOAD holding addr
  int seg_prot;                // its protection after start-up (RELRO: read-only)
  uintptr_t mcount;
};

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
  bool relro = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && s->mcount >= lo && s->mcount < hi) {
      s->text_lo = lo;
      s->text_hi = hi;
    }
    if (ph.p_type == PT_LOAD && s->addr >= lo && s->addr < hi) {
      s->seg_lo = lo;
      s->seg_hi = hi;
      s->seg_prot = ((ph.p_flags & PF_R) ? PROT_READ : 0) | ((ph.p_flags & PF_W) ? PROT_WRITE : 0) |
                    ((ph.p_flags & PF_X) ? PROT_EXEC : 0);
    }
    if (ph.p_type == PT_GNU_RELRO && s->addr >= lo && s->addr < hi) relro = true;
  }
  if (relro) s->seg_prot = PROT_READ;
  return 1;
}

}  // namespace


// Finds GLRO(dl_open) by value and replaces it with hooked_dl_open. The
// layout of _rtld_global_ro is glibc-private; from glibc 2.34 to 2.41 its
// table of entry points for libc reads (sysdeps/generic/ldsodefs.h,
// elf/rtld.c): _dl_debug_printf, _dl_mcount, _dl_lookup_symbol_x,
// _dl_open, _dl_close, _dl_catch_error, every one a function of ld.so.
// The hook is installed only if exactly one word of _rtld_global_ro's
// segment holds the address of the public _dl_mcount and the words around
// it are five distinct pointers into ld.so's code; otherwise nothing is
// changed and the dlopen interposers alone copy TLS (LD_PRELOAD.md 7.20).
// Once, at start-up (M:N only).
bool install_dl_open_hook(const char** why) {
  char* rgro = real::lazy::_rtld_global_ro();
  auto mcount = real::lazy::_dl_mcount();
  if (!rgro || !mcount) {
    *why = "_rtld_global_ro or _dl_mcount not found";
    return false;
  }
  LdsoSegs s{};
  s.addr = (uintptr_t)rgro;
  s.mcount = (uintptr_t)mcount;
  dl_iterate_phdr(find_segs, &s);
  if (!s.found || !s.text_lo || !s.seg_lo) {
    *why = "_dl_mcount is not in the code of the object defining _rtld_global_ro";
    return false;
  }
  // The table lies within the first 4 KiB of _rtld_global_ro (it is at
  // about 0x300 in 2.36) and inside its segment.
  uintptr_t lo = ((uintptr_t)rgro + 7) & ~(uintptr_t)7;
  uintptr_t hi = (uintptr_t)rgro + 4096;
  if (hi > s.seg_hi) hi = s.seg_hi;
  auto in_text = [&](uintptr_t v) { return v >= s.text_lo && v < s.text_hi; };
  uintptr_t* slot = nullptr;
  int hits = 0;
  for (uintptr_t p = lo + 8; p + 4 * 8 < hi; p += 8) {
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
  uintptr_t page = page_size();
  uintptr_t plo = (uintptr_t)slot & ~(page - 1);
  if (sys::mprotect((void*)plo, page, s.seg_prot | PROT_READ | PROT_WRITE) != 0) {
    *why = "cannot make _rtld_global_ro writable";
    return false;
  }
  glibc_dl_open = (dl_open_t)*slot;
  dl_open_hooked_.store(true, std::memory_order_release);
  __atomic_store_n(slot, (uintptr_t)&hooked_dl_open, __ATOMIC_RELEASE);
  if (sys::mprotect((void*)plo, page, s.seg_prot) != 0)
    rawlog("goshim: warning: cannot make _rtld_global_ro read-only again\n");
  return true;
}

bool dl_open_hooked() { return dl_open_hooked_.load(std::memory_order_acquire); }

}  // namespace goshim
