// Per-goroutine glibc TLS blocks: the recipe of TLS.md, with every offset
// into struct pthread found at run time and checked.
#include "core/tls.hpp"

#include <elf.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <locale.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <netinet/in.h>
#include <resolv.h>  // struct __res_state (a public ABI)
#undef p_type      // resolv.h's name for __p_type: ElfW(Phdr)'s member here
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <initializer_list>
#include <new>

#include "arch/arch.hpp"
#include "core/gmp.hpp"
#include "core/mcache.hpp"
#include "core/rawlog.hpp"
#include "core/tcb.hpp"
#include "core/real.hpp"
#include "syscalls/sys.hpp"

namespace goshim::tls {

Layout L;
Probe last_probe;
__thread bool keys_stored __attribute__((tls_model("initial-exec")));

namespace {

constexpr bool kVariantI = arch::kTlsVariantI;

// tcbhead_t: a fixed ABI. x86-64 (variant II, at tp): the fields below.
// aarch64 (variant I, at tp): {dtv, private} only; the stack and pointer
// guards are globals there and single-thread detection is global.
constexpr size_t kTcbSelf0 = 0x00;
constexpr size_t kTcbDtv = kVariantI ? 0x00 : 0x08;
constexpr size_t kTcbPrivate = 0x08;  // aarch64
constexpr size_t kTcbSelf = 0x10;
constexpr size_t kTcbMultipleThreads = 0x18;
constexpr size_t kTcbSysinfo = 0x20;
constexpr size_t kTcbStackGuard = 0x28;
constexpr size_t kTcbPointerGuard = 0x30;
constexpr size_t kTcbFeature1 = 0x48;
constexpr uint32_t kFeature1Shstk = 1u << 1;  // CET shadow stack active

#if defined(__aarch64__)
constexpr uint32_t kRseqSig = 0xd428bc00;  // RSEQ_SIG on aarch64 (brk #0x45e0)
#else
constexpr uint32_t kRseqSig = 0x53053053;  // RSEQ_SIG on x86
#endif
constexpr int kRseqFlagUnregister = 1;
constexpr uint32_t kRseqCpuIdRegistrationFailed = (uint32_t)-2;
constexpr uint32_t kRseqCpuIdUninitialized = (uint32_t)-1;

using allocate_tls_t = void* (*)(void*);
using deallocate_tls_t = void (*)(void*, bool);
using static_info_t = void (*)(size_t*, size_t*);
using voidfn_t = void (*)();

allocate_tls_t dl_allocate_tls;
deallocate_tls_t dl_deallocate_tls;
voidfn_t call_tls_dtors;
voidfn_t ctype_init;

uintptr_t t0;                  // the initial thread's TCB
intptr_t robust_futex_offset;  // robust_list_head.futex_offset as glibc sets it
size_t link_map_tls_offset;    // offsetof(struct link_map, l_tls_offset)

// Module ids whose static TLS every block already has (bit per modid).
constexpr size_t kMaxModid = 4096;
uint64_t modid_done[kMaxModid / 64];
Mutex dlopen_lock{LockRank::TlsDlopen};  // serializes after_dlopen

// The static TLS images, to re-initialize a recycled block without glibc
// (whose _dl_allocate_tls_init takes the loader's recursive lock).
struct StaticModule {
  uintptr_t image;
  size_t filesz, memsz;
  size_t offset;  // l_tls_offset: see module_block
  bool own;       // goshim's own module: its .tdata is jemalloc's je_tsd_tls
};
// keys_stored's offset from tp, and whether own modules are known.
intptr_t keys_stored_off;
bool own_known;
// Set by libgoshim.so (own_tdata_is_allocator_state), whose own .tdata is
// jemalloc's thread state only (the Makefile checks it at link time); not
// in the unit tests, whose own module is the test program.
std::atomic<bool> own_tdata_allocator{false};

// A module's static TLS block in the block whose thread pointer is tp.
inline uintptr_t module_block(uintptr_t tp, size_t l_tls_offset) {
  return kVariantI ? tp + l_tls_offset : tp - l_tls_offset;
}
constexpr int kMaxStaticModules = 64;
StaticModule static_mods[kMaxStaticModules];
std::atomic<int> nstatic_mods{0};
// Set once a module with dynamic TLS is loaded: recycled blocks may then
// hold DTV entries that glibc must free, so they take glibc's path.
std::atomic<bool> dynamic_tls{false};

// A module's static TLS: its image, sizes and place in a block.
struct NewModule {
  uintptr_t image;
  size_t filesz, memsz;
  size_t offset;  // l_tls_offset: see module_block
};

// What note_module found.
enum class ModTls {
  Static,     // static TLS, recorded in static_mods
  None,       // no TLS, or dynamic TLS for good (FORCED_DYNAMIC_TLS_OFFSET)
  NotStatic,  // no static TLS offset yet: a dlopen may still be relocating it,
              // or a later module's initial-exec reference may give it one
  Unrecorded, // static TLS, but not recorded (static_mods full, or no memory
              // for the copy): recycled blocks take glibc's path
};
// The static TLS of the module note_module saw last (Static, Unrecorded).
NewModule last_noted;

// Records a module's TLS.
ModTls note_module(struct dl_phdr_info* info) {
  const ElfW(Phdr)* ph = nullptr;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_TLS) ph = &info->dlpi_phdr[i];
  if (!ph) return ModTls::None;
  for (struct link_map* lm = _r_debug.r_map; lm; lm = lm->l_next) {
    if (lm->l_addr != info->dlpi_addr) continue;
    if (strcmp(lm->l_name ? lm->l_name : "", info->dlpi_name ? info->dlpi_name : "") != 0)
      continue;
    size_t off = *(size_t*)((uintptr_t)lm + link_map_tls_offset);
    if (off == 0 || off == (size_t)-1) {
      dynamic_tls.store(true, std::memory_order_release);
      return off == 0 ? ModTls::NotStatic : ModTls::None;
    }
    last_noted = NewModule{info->dlpi_addr + ph->p_vaddr, ph->p_filesz, ph->p_memsz, off};
    int n = nstatic_mods.load(std::memory_order_relaxed);
    if (n >= kMaxStaticModules) {
      dynamic_tls.store(true, std::memory_order_release);  // fall back to glibc's path
      return ModTls::Unrecorded;
    }
    // goshim's own copy of the image: the module may be unloaded (dlclose)
    // while recycled blocks are still re-initialized from it.
    uintptr_t image = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_filesz) {
      void* copy = sys::mmap(nullptr, ph->p_filesz, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (copy == MAP_FAILED) {
        dynamic_tls.store(true, std::memory_order_release);  // glibc's path
        return ModTls::Unrecorded;
      }
      memcpy(copy, (const void*)image, ph->p_filesz);
      image = (uintptr_t)copy;
    }
    static_mods[n] = StaticModule{image, ph->p_filesz, ph->p_memsz, off, false};
    if (own_known) {
      intptr_t lo = (intptr_t)module_block(0, off);
      static_mods[n].own = keys_stored_off >= lo && keys_stored_off < lo + (intptr_t)ph->p_memsz &&
                           keys_stored_off >= lo + (intptr_t)ph->p_filesz;
    }
    nstatic_mods.store(n + 1, std::memory_order_release);
    return ModTls::Static;
  }
  dynamic_tls.store(true, std::memory_order_release);  // unknown: be conservative
  return ModTls::NotStatic;
}

template <typename T>
T& at(uintptr_t base, size_t off) {
  return *reinterpret_cast<T*>(base + off);
}

// Stores v unless the field holds it already (a recycled block mostly
// does): no write, so the cache line need not move to this CPU.
template <typename T>
void set_if(uintptr_t base, size_t off, T v) {
  T& f = at<T>(base, off);
  if (f != v) f = v;
}

bool db_offset(const uint32_t* d, size_t* out) {
  if (!d) return false;
  *out = d[2];  // {bits, count, offset}
  return true;
}

// cancelhandling's bits goshim reads and sets (core/signal.cpp, tcb.cpp,
// preempt.cpp, syncwait.cpp, proc.cpp), checked by the probe.
constexpr int kChDisabled = 1 << 0, kChAsync = 1 << 1, kChCanceling = 1 << 2,
              kChCanceled = 1 << 3, kChExiting = 1 << 4;

// Cancels the calling (probe) thread the way goshim does a goroutine: a
// buffer of its own in cleanup_jmp_buf (core/proc.cpp g_entry), the bits
// goshim's pthread_cancel sets (signal.cpp cancel_send), then glibc's
// pthread_testcancel (cancel_point), which must unwind to the buffer.
__attribute__((noinline)) void cancel_unwind_probe(Probe* pr) {
  volatile uintptr_t self = arch::get_tp();  // offsets are tp-relative
  void* volatile prev = at<void*>(self, L.cleanup_jmp_buf);
  Probe* volatile vpr = pr;
  __pthread_unwind_buf_t ub;
  if (_setjmp((struct __jmp_buf_tag*)ub.__cancel_jmp_buf) == 0) {
    ub.__pad[0] = prev;  // glibc's own buffer (start_thread's)
    ub.__pad[1] = nullptr;
    at<void*>(self, L.cleanup_jmp_buf) = &ub;
    __atomic_or_fetch((int*)(self + L.cancelhandling), kChCanceling | kChCanceled,
                      __ATOMIC_RELEASE);
    real::pthread_testcancel();
    // glibc did not act on goshim's bits: undo them, report.
    __atomic_and_fetch((int*)(self + L.cancelhandling), ~(kChCanceling | kChCanceled),
                       __ATOMIC_RELEASE);
    at<void*>(self, L.cleanup_jmp_buf) = prev;
    vpr->cancel_returned = true;
    return;
  }
  // glibc unwound to the buffer (and marked the thread EXITING). The thread
  // only returns from here; no cancellation point may act on it again.
  at<void*>(self, L.cleanup_jmp_buf) = prev;
  int old;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  vpr->cancel_landed = true;
}

void* probe_main(void* arg) {
  Probe* pr = (Probe*)arg;
  tls_alloc_arena0 = true;  // no arena of its own (core/mcache.hpp)
  // Every offset in L is relative to tp (THREAD_SELF = tp + L.pd).
  uintptr_t tp = arch::get_tp();
  uintptr_t self = tp + L.pd;
  pr->self = self;
  pr->tid = (pid_t)sys::gettid();
  void* head = nullptr;
  size_t len = 0;
  if (sys::get_robust_list(0, &head, &len) != 0)  // ENOSYS under qemu-user
    head = (void*)tcb::scan_robust_head(self, L.sizeof_pthread);
  if (head) {
    pr->robust_head = (uintptr_t)head;
    pr->futex_offset = *(intptr_t*)((uintptr_t)head + 8);
  }
  pr->res = (uintptr_t)__res_state();
  pr->resp_tls = (uintptr_t)real::tls_address(real::lazy::__resp(), tp);
  pr->tls_g_addr = (uintptr_t)&tls_g;
  // Look for the (stackblock, stackblock_size) pair inside the TCB.
  for (size_t off = 0; off + 16 <= L.sizeof_pthread; off += 8) {
    if (at<uintptr_t>(self, off) == pr->stack_lo && at<size_t>(self, off + 8) == pr->stack_size) {
      pr->stackblock = off + L.pd;  // tp-relative
      pr->stackblock_hits++;
    }
  }
  pr->cleanup_jmp_buf_val = at<uintptr_t>(tp, L.cancelhandling - 8);
  pr->specific0 = at<uintptr_t>(tp, L.specific);
  // specific_used, the byte after specific[]: glibc's pthread_setspecific
  // sets it when it stores a value (block_reinit_static relies on it).
  size_t su = L.specific + 32 * sizeof(void*);
  pthread_key_t key;
  if (su - L.pd < L.sizeof_pthread && real::pthread_key_create(&key, nullptr) == 0) {
    static int value;
    pr->specific_used_before = *(volatile uint8_t*)(tp + su);
    if (real::pthread_setspecific(key, &value) == 0)
      pr->specific_used_after = *(volatile uint8_t*)(tp + su);
    real::pthread_setspecific(key, nullptr);
    real::pthread_key_delete(key);
  }
  pr->list_next = at<uintptr_t>(tp, L.list);
  if (!kVariantI) {
    pr->multiple_threads = at<int>(tp, kTcbMultipleThreads);
    pr->tcb_self0 = at<uintptr_t>(tp, kTcbSelf0);
    pr->tcb_self = at<uintptr_t>(tp, kTcbSelf);
    pr->stack_guard = at<uintptr_t>(tp, kTcbStackGuard);
    pr->pointer_guard = at<uintptr_t>(tp, kTcbPointerGuard);
  }
  if (pr->robust_head > self + 8 && pr->robust_head < self + L.sizeof_pthread)
    pr->robust_prev = *(uintptr_t*)(pr->robust_head - 8);
  // rseq: the length glibc registered is not exported (__rseq_size is the
  // feature size), and unregistering needs it exactly. Find it here, on a
  // thread that is about to exit, so that main's registration can be moved
  // for sure later (move_kernel_registrations).
  if (L.rseq_size) {
    uintptr_t area = tp + L.rseq;
    pr->rseq_cpu_id = at<uint32_t>(area, 4);
    if (pr->rseq_cpu_id != kRseqCpuIdRegistrationFailed) {
      pr->rseq_unregister_failed = true;
      for (uint32_t len = 32; len <= 1024; len += 32) {
        long r = sys::rseq((void*)area, len, kRseqFlagUnregister, kRseqSig);
        if (r == 0) {
          pr->rseq_reglen = len;
          pr->rseq_unregister_failed = false;
          break;
        }
        if (r != -EINVAL) break;
      }
    }
  }
  // cancelhandling: the bits glibc's public calls set (none of them is a
  // cancellation point, and no cancellation is pending).
  volatile int* ch = (volatile int*)(tp + L.cancelhandling);
  int old;
  pr->ch_start = *ch;
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
  pr->ch_async = *ch;
  pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old);
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  pr->ch_disabled = *ch;
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
  pr->ch_enabled = *ch;
  // Only with the bits and cleanup_jmp_buf as expected (else this could
  // act for real or write to the wrong field).
  if (pr->ch_start == 0 && pr->ch_async == kChAsync && pr->ch_disabled == kChDisabled &&
      pr->ch_enabled == 0 && pr->cleanup_jmp_buf_val >= pr->stack_lo &&
      pr->cleanup_jmp_buf_val < pr->stack_lo + pr->stack_size)
    cancel_unwind_probe(pr);
  return nullptr;
}

}  // namespace

bool init(const char** why) {
  *why = nullptr;
  // glibc before 2.34 keeps the thread library in a separate libpthread.so.0
  // with a different struct pthread and other internal paths: goshim has
  // never been checked there (Debian 11, glibc 2.31, is tested in 1:1 mode).
  int major = 0, minor = 0;
  const char* ver = gnu_get_libc_version();
  for (; *ver >= '0' && *ver <= '9'; ver++) major = major * 10 + (*ver - '0');
  if (*ver == '.')
    for (ver++; *ver >= '0' && *ver <= '9'; ver++) minor = minor * 10 + (*ver - '0');
  if (major < 2 || (major == 2 && minor < 34)) {
    *why = "glibc older than 2.34 (libpthread is a separate library) is not supported for M:N";
    return false;
  }
  // SIGCANCEL (32) and SIGSETXID (33) are hard-coded (core/signal.cpp,
  // setxid.cpp, cancelproto.cpp): glibc reserves exactly those two below
  // its SIGRTMIN.
  if (__libc_current_sigrtmin() != 34) {
    *why = "glibc does not reserve exactly signals 32 and 33 (SIGRTMIN is not 34)";
    return false;
  }
  dl_allocate_tls = real::lazy::_dl_allocate_tls();
  dl_deallocate_tls = real::lazy::_dl_deallocate_tls();
  auto static_info = real::lazy::_dl_get_tls_static_info();
  call_tls_dtors = real::lazy::__call_tls_dtors();
  ctype_init = real::lazy::__ctype_init();
  if (!dl_allocate_tls || !dl_deallocate_tls || !static_info || !call_tls_dtors || !ctype_init) {
    *why = "glibc's private TLS entry points are missing";
    return false;
  }
  static_info(&L.static_size, &L.static_align);

  const uint32_t* sz = real::lazy::_thread_db_sizeof_pthread();
  if (!sz) {
    *why = "glibc's libthread_db descriptors are missing (glibc < 2.34?)";
    return false;
  }
  L.sizeof_pthread = *sz;
  if (L.sizeof_pthread < 1024 || L.sizeof_pthread > 16384 ||
      (!kVariantI && L.sizeof_pthread >= L.static_size) || L.static_align > 4096 ||
      (L.static_align & (L.static_align - 1))) {
    *why = "unexpected glibc TLS geometry";
    return false;
  }
  if (kVariantI) {
    // _dl_get_tls_static_info's size is the tcbhead and the static TLS
    // above tp; struct pthread (TLS_PRE_TCB_SIZE) comes on top, below tp,
    // and tp keeps the static alignment.
    size_t align = L.static_align < 64 ? 64 : L.static_align;
    if (L.static_size < 16 || L.sizeof_pthread % 16) {
      *why = "unexpected glibc TLS geometry";
      return false;
    }
    L.below_tp = (L.sizeof_pthread + align - 1) & ~(align - 1);
    L.above_tp = L.static_size;
    L.pd = (size_t)0 - L.sizeof_pthread;
  } else {
    L.below_tp = L.static_size - L.sizeof_pthread;
    L.above_tp = L.sizeof_pthread;
    L.pd = 0;
    if (L.below_tp % L.static_align) {
      *why = "unexpected glibc static TLS alignment";
      return false;
    }
  }
  if (!db_offset(real::lazy::_thread_db_pthread_list(), &L.list) ||
      !db_offset(real::lazy::_thread_db_pthread_tid(), &L.tid) ||
      !db_offset(real::lazy::_thread_db_pthread_specific(), &L.specific) ||
      !db_offset(real::lazy::_thread_db_pthread_cancelhandling(), &L.cancelhandling) ||
      !db_offset(real::lazy::_thread_db_pthread_report_events(), &L.report_events) ||
      !db_offset(real::lazy::_thread_db_link_map_l_tls_offset(), &link_map_tls_offset)) {
    *why = "a libthread_db descriptor is missing";
    return false;
  }
  // From here on every struct pthread offset is relative to tp.
  for (size_t* f : {&L.list, &L.tid, &L.specific, &L.cancelhandling, &L.report_events}) *f += L.pd;
  L.cleanup_jmp_buf = L.cancelhandling - 8;  // stable since glibc 2.3

  t0 = arch::get_tp();
  if (!kVariantI && at<uint32_t>(t0, kTcbFeature1) & kFeature1Shstk) {
    *why = "CET shadow stacks are active (goshim does not switch shadow stacks)";
    return false;
  }

  // rseq (glibc >= 2.35). Weak lookups: older glibc has neither symbol.
  const ptrdiff_t* rseq_off = real::lazy::__rseq_offset();
  const unsigned* rseq_size = real::lazy::__rseq_size();
  if (rseq_off && rseq_size) {
    L.rseq = *rseq_off;
    L.rseq_size = *rseq_size;
    L.rseq_area = true;
  }

  // The probe thread: a real kernel thread on a stack we supply, so the
  // stackblock pair is known, and with glibc's full start_thread setup to
  // read offsets from.
  size_t probe_size = 256 * 1024;
  void* stk = sys::mmap(nullptr, probe_size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stk == MAP_FAILED) {
    *why = "cannot map the probe thread's stack";
    return false;
  }
  Probe pr{};
  pr.stack_lo = (uintptr_t)stk;
  pr.stack_size = probe_size;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, stk, probe_size);
  pthread_t th;
  int err = real::pthread_create(&th, &attr, probe_main, &pr);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    sys::munmap(stk, probe_size);
    *why = "cannot create the probe thread";
    return false;
  }
  real::pthread_join(th, nullptr);
  // The joined thread's TCB is still in the stack goshim supplied.
  if (pr.self > pr.stack_lo && pr.self + L.sizeof_pthread <= pr.stack_lo + probe_size)
    pr.ch_joined = at<int>(pr.self - L.pd, L.cancelhandling);
  sys::munmap(stk, probe_size);
  last_probe = pr;
  if ((*why = check_probe(pr))) return false;

  // goshim's own module (the one holding keys_stored, in its .tbss).
  keys_stored_off = (intptr_t)((uintptr_t)&keys_stored - arch::get_tp());
  own_known = true;
  // Every module loaded now is in the static TLS image of every block.
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void*) -> int {
        if (info->dlpi_tls_modid && info->dlpi_tls_modid < kMaxModid &&
            note_module(info) != ModTls::NotStatic)
          modid_done[info->dlpi_tls_modid / 64] |= 1ull << (info->dlpi_tls_modid % 64);
        return 0;
      },
      nullptr);
  return true;
}

const char* check_probe(const Probe& pr) {
  const size_t probe_size = pr.stack_size;
  const uintptr_t ptp = pr.self - L.pd;  // the probe's thread pointer

  // Checks: every offset agrees with what the probe saw.
  if (pr.self == 0 || pr.stackblock_hits != 1) {
    return "cannot locate stackblock in struct pthread";
  }
  L.stackblock = pr.stackblock;
  L.stackblock_size = pr.stackblock + 8;
  if (pr.robust_head <= pr.self || pr.robust_head >= pr.self + L.sizeof_pthread) {
    return "cannot locate robust_head in struct pthread";
  }
  L.robust_head = pr.robust_head - ptp;
  L.robust_prev = L.robust_head - 8;
  robust_futex_offset = pr.futex_offset;
  if (pr.res <= pr.self || pr.res >= pr.self + L.sizeof_pthread) {
    return "cannot locate the resolver state in struct pthread";
  }
  L.res = pr.res - ptp;
  if (!pr.resp_tls) {
    return "glibc's __resp TLS symbol is missing";
  }
  L.resp = (intptr_t)(pr.resp_tls - ptp);
  L.tls_g = (intptr_t)(pr.tls_g_addr - ptp);
  if (pr.specific0 <= pr.self || pr.specific0 >= pr.self + L.sizeof_pthread) {
    return "cannot locate specific_1stblock in struct pthread";
  }
  L.specific_1stblock = pr.specific0 - ptp;
  // Not a reason to refuse: without it every recycled block clears its keys.
  L.keys_region = pr.specific_used_before == 0 && pr.specific_used_after == 1 &&
                  L.specific == L.specific_1stblock + 32 * 16;
  L.specific_used = L.specific + 32 * sizeof(void*);
  if (pr.cleanup_jmp_buf_val < pr.stack_lo || pr.cleanup_jmp_buf_val >= pr.stack_lo + probe_size) {
    return "cleanup_jmp_buf is not where TLS.md says";
  }
  if (pr.list_next == 0 || (!kVariantI && pr.multiple_threads != 1)) {
    return "struct pthread list/multiple_threads check failed";
  }
  // tcbhead_t (fixed offsets, x86-64): the two self pointers, and the
  // guards that glibc copies from the initial thread into every thread.
  // aarch64's tcbhead_t is {dtv, private}: nothing of goshim's there.
  if (!kVariantI &&
      (pr.tcb_self0 != pr.self || pr.tcb_self != pr.self || at<uintptr_t>(t0, kTcbSelf0) != t0 ||
       at<uintptr_t>(t0, kTcbSelf) != t0)) {
    return "tcbhead_t's self pointers are not at 0x0 and 0x10";
  }
  if (!kVariantI && (pr.stack_guard != at<uintptr_t>(t0, kTcbStackGuard) ||
                     pr.pointer_guard != at<uintptr_t>(t0, kTcbPointerGuard))) {
    return "tcbhead_t's stack and pointer guards are not at 0x28 and 0x30";
  }
  // robust_prev sits just below robust_head and points at it in a thread
  // that holds no robust mutex.
  if (pr.robust_prev != pr.robust_head) {
    return "robust_prev is not just below robust_head in struct pthread";
  }
  if (pr.rseq_unregister_failed) {
    return "cannot find the length glibc registered its rseq area with";
  }
  L.rseq_reglen = pr.rseq_reglen;  // 0: glibc registered no rseq area
  // tid: the descriptor offset must hold the kernel tid in a live thread;
  // check it on the current (initial) thread.
  if (at<pid_t>(t0, L.tid) != (pid_t)sys::gettid()) {
    return "the tid descriptor does not match the kernel tid";
  }
  // The stack pair, tid and other fields must not overlap each other.
  if (L.stackblock <= L.tid && L.tid < L.stackblock + 16) {
    return "struct pthread layout check failed";
  }
  // Static TLS: below tp in variant II, above the tcbhead in variant I.
  auto in_static_tls = [](intptr_t off) {
    return kVariantI ? (off >= 16 && off < (intptr_t)L.above_tp)
                     : (off < 0 && -off <= (intptr_t)L.below_tp);
  };
  if (!in_static_tls(L.resp) || !in_static_tls(L.tls_g)) {
    return "TLS variables are not in static TLS";
  }
  if (L.rseq_area && (L.rseq < -(intptr_t)L.below_tp ||
                      L.rseq + (intptr_t)(L.rseq_reglen > 32 ? L.rseq_reglen : 32) >
                          (intptr_t)L.above_tp)) {
    return "the rseq area is not in the thread's TLS block";
  }

  // cancelhandling's bits (their values are glibc-private): each public
  // call set exactly its bit, the thread ended EXITING, and glibc acted on
  // the bits goshim sets by unwinding to goshim's buffer.
  if (pr.ch_start != 0 || pr.ch_async != kChAsync || pr.ch_disabled != kChDisabled ||
      pr.ch_enabled != 0)
    return "cancelhandling's state and type bits are not where goshim expects them";
  if (pr.ch_joined < 0 || !(pr.ch_joined & kChExiting))
    return "cancelhandling's EXITING bit is not where goshim expects it";
  if (!pr.cancel_landed || pr.cancel_returned)
    return "glibc's cancellation did not unwind to goshim's cleanup buffer";
  return nullptr;
}


// Brings a recycled block back to a new thread's state without glibc: the
// static TLS images are copied again and the TCB cleared (keeping its DTV,
// whose entries for static modules point into this block anyway).
// Zeroes n bytes at p with plain 16-byte stores: glibc's memset switches
// to `rep stosb` from 2 KiB on (struct pthread is 2.3 KiB), which cost a
// quarter of a create+join on this machine's CPUs.
// (The loop must stay a loop: gcc and clang each say so their own way.)
#if defined(__clang__)
#define GOSHIM_NO_MEMSET_IDIOM __attribute__((no_builtin("memset")))
#else
#define GOSHIM_NO_MEMSET_IDIOM __attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
GOSHIM_NO_MEMSET_IDIOM static void zero16(uintptr_t p, size_t n) {
  if ((p | n) & 15) {
    memset((void*)p, 0, n);
    return;
  }
  typedef long long v2 __attribute__((vector_size(16)));
  v2* q = (v2*)p;
  v2 z = {0, 0};
  size_t i = 0, cnt = n / 16;
  for (; i + 4 <= cnt; i += 4) {
    q[i] = z;
    q[i + 1] = z;
    q[i + 2] = z;
    q[i + 3] = z;
  }
  for (; i < cnt; i++) q[i] = z;
}

// struct pthread, cleared in parts: what a thread's life cannot have
// written is already zero (it was cleared before this block's last use,
// or is fresh memory) and is not touched again, so its cache lines stay
// where they are.
//  - x86-64's tcbhead_t from 0x80 to its end at 0x2c0 (__glibc_unused2
//    and __padding, nine lines): glibc's tls.h keeps them for the size of
//    tcbhead_t only (programs such as AddressSanitizer depend on it) and
//    no longer uses them; the fields glibc, libitm (__private_tm) and
//    gcc's split stacks (__private_ss) use are all in the first two lines.
//  - specific_1stblock and specific[] (twelve lines): written only by
//    pthread_setspecific, which is goshim's key_set (keys_stored, set
//    first thing, for NULL values too) or glibc's own, which sets
//    specific_used when it stores a value (the probe checks that; a NULL
//    stored there over a zero slot leaves only a sequence number that no
//    reader looks at while data is NULL), and by key reads and the exit
//    destructors, which only clear values stored before.
//  - the resolver state `res` (nine lines) past its first 16-byte word,
//    when its options are 0: res_init has not run in the thread (it sets
//    RES_INIT, and the resolver's sockets and name-server copies exist
//    only after it), so the thread wrote nothing there or only fields
//    that a new thread's res_init overwrites. That is glibc's own
//    contract for a reused thread descriptor (its __res_thread_freeres
//    sets only options to 0, leaving the other fields; tests/preload/
//    thread_starts_clean). A thread whose options are not 0 has its res
//    cleared whole, as before.
constexpr size_t kTcbUnusedLo = 0x80, kTcbUnusedHi = 0x2c0;

static void zero_pthread(uintptr_t tp, bool keys) {
  uintptr_t pd = tp + L.pd, end = pd + L.sizeof_pthread;
  uintptr_t at0 = pd;
  if (!kVariantI && L.list >= kTcbUnusedHi) {
    zero16(pd, kTcbUnusedLo);
    at0 = pd + kTcbUnusedHi;
  }
  if (!keys && L.keys_region) {
    uintptr_t klo = tp + L.specific_1stblock, khi = tp + L.specific_used;
    zero16(at0, klo - at0);
    at0 = khi;
  }
  // res, from its first 16-byte boundary after the options word's start
  // to its end's (the rest is cleared with its neighbours).
  uintptr_t rlo = ((tp + L.res + offsetof(struct __res_state, options)) + 15) & ~(uintptr_t)15;
  uintptr_t rhi = (tp + L.res + sizeof(struct __res_state)) & ~(uintptr_t)15;
  if (rlo >= at0 && rhi <= end && rlo < rhi &&
      at<unsigned long>(tp + L.res, offsetof(struct __res_state, options)) == 0) {
    zero16(at0, rlo - at0);
    at0 = rhi;
  }
  zero16(at0, end - at0);
}

template <bool kHot>
static void set_fixed(uintptr_t tp, G* gp);

// Returns whether specific[] was cleared (else it holds what set_fixed
// stored there, untouched since).
static bool block_reinit_static(uintptr_t tp) {
  int n = nstatic_mods.load(std::memory_order_acquire);
  // Read before the loop clears it.
  bool keys = !L.keys_region || !own_known || at<bool>(tp, keys_stored_off) ||
              at<uint8_t>(tp, L.specific_used);
  bool stored = !own_known || !own_tdata_allocator.load(std::memory_order_relaxed) ||
                at<bool>(tp, keys_stored_off);
  for (int i = 0; i < n; i++) {
    const StaticModule& m = static_mods[i];
    uintptr_t dest = module_block(tp, m.offset);
    // jemalloc's thread state: untouched unless a key was stored.
    if (!m.own || stored) memcpy((void*)dest, (const void*)m.image, m.filesz);
    memset((void*)(dest + m.filesz), 0, m.memsz - m.filesz);
  }
  uintptr_t dtv = at<uintptr_t>(tp, kTcbDtv);
  zero_pthread(tp, keys);
  if (kVariantI) at<uintptr_t>(tp, kTcbPrivate) = 0;
  at<uintptr_t>(tp, kTcbDtv) = dtv;
  return keys || !L.keys_region;
}

bool block_clean_at_exit(uintptr_t tp, G* gp, uintptr_t stack_lo, size_t stack_size) {
  if (dynamic_tls.load(std::memory_order_acquire)) return false;
  bool keys = block_reinit_static(tp);
  // The fields every thread of this block holds alike, written now, on
  // lines this CPU has just cleared, rather than read and written cold at
  // the next create. The tid too: every thread of a slot has its G's vtid
  // (natively an exited thread's is 0, but nothing reads a goroutine's: the
  // calls that take a pthread_t are goshim's, and the block is on none of
  // glibc's lists), so a clean block's create touches no line of it.
  set_fixed<true>(tp, gp);
  at<pid_t>(tp, L.tid) = gp->vtid;
  if (keys) at<uintptr_t>(tp, L.specific) = tp + L.specific_1stblock;
  if (stack_lo) set_stack(tp, stack_lo, stack_size);
  return true;
}

// What block_init writes in every block whatever its thread, tid and
// report_events aside. specific[0] too: clean blocks keep it (see above).
// kHot: the lines were just written (plain stores); else set_if.
template <bool kHot>
static void set_fixed(uintptr_t tp, G* gp) {
  auto set_if = [](uintptr_t base, size_t off, auto v) {
    if (kHot)
      at<decltype(v)>(base, off) = v;
    else
      tls::set_if<decltype(v)>(base, off, v);
  };
  if (!kVariantI) {
    set_if(tp, kTcbSelf0, (uintptr_t)(tp));
    set_if(tp, kTcbSelf, (uintptr_t)(tp));
    set_if(tp, kTcbMultipleThreads, (int)(1));
    set_if(tp, kTcbSysinfo, (uintptr_t)(at<uintptr_t>(t0, kTcbSysinfo)));
    set_if(tp, kTcbStackGuard, (uintptr_t)(at<uintptr_t>(t0, kTcbStackGuard)));
    set_if(tp, kTcbPointerGuard, (uintptr_t)(at<uintptr_t>(t0, kTcbPointerGuard)));
    set_if(tp, kTcbFeature1, (uint32_t)(at<uint32_t>(t0, kTcbFeature1)));
  }
  // list points at itself: glibc's list_del on it (fork) stays harmless and
  // the G is on none of glibc's thread lists.
  set_if(tp, L.list, (uintptr_t)(tp + L.list));
  set_if(tp, L.list + 8, (uintptr_t)(tp + L.list));
  set_if(tp, L.robust_prev, (uintptr_t)(tp + L.robust_head));
  set_if(tp, L.robust_head, (uintptr_t)(tp + L.robust_head));
  set_if(tp, L.robust_head + 8, (intptr_t)(robust_futex_offset));
  set_if(tp, L.robust_head + 16, (uintptr_t)(0));
  // Also when glibc's own registration failed (__rseq_size 0: qemu-user
  // has no rseq): pthread_create passes "register rseq" on to the new
  // thread when the creator's cpu_id is >= 0, and a new M created from a
  // goroutine would then die in start_thread ("rseq registration failed").
  if (L.rseq_area) {
    set_if(tp + L.rseq, 0, (uint32_t)(0));
    set_if(tp + L.rseq, 4, (uint32_t)(kRseqCpuIdRegistrationFailed));
  }
  set_if(tp + L.resp, 0, (uintptr_t)(tp + L.res));
  set_if(tp + L.tls_g, 0, (G*)(gp));
}

bool block_init(uintptr_t tp, G* gp, bool fresh, bool clean, bool* clean_kept) {
  // pthread_cancel marked the G since its last create: bits it set on the
  // zombie after its block was reset are cleared below (the other paths
  // clear the whole TCB).
  bool marked = gp->cancel_marked.load(std::memory_order_relaxed);
  if (marked) gp->cancel_marked.store(false, std::memory_order_relaxed);
  if (clean && !fresh && !dynamic_tls.load(std::memory_order_acquire)) {
    // block_clean_at_exit left it as below (tid included) but for
    // report_events (0 there): no line of the block is read or written
    // here unless a cancel marked the zombie.
    if (marked) __atomic_store_n(&at<int>(tp, L.cancelhandling), 0, __ATOMIC_RELAXED);
    if (uint8_t re = at<uint8_t>(t0, L.report_events)) at<uint8_t>(tp, L.report_events) = re;
    if (clean_kept) *clean_kept = true;
    return true;
  }
  if (!fresh && !dynamic_tls.load(std::memory_order_acquire)) {
    block_reinit_static(tp);
  } else {
    if (!fresh) {
      dl_deallocate_tls((void*)tp, false);
      memset((void*)(tp + L.pd), 0, L.sizeof_pthread);
      if (kVariantI) memset((void*)tp, 0, 16);
    }
    if (!dl_allocate_tls((void*)tp)) return false;
  }
  set_fixed<false>(tp, gp);
  set_if<pid_t>(tp, L.tid, gp->vtid);
  set_if<uintptr_t>(tp, L.specific, tp + L.specific_1stblock);
  set_if<uint8_t>(tp, L.report_events, at<uint8_t>(t0, L.report_events));
  return true;
}

void set_stack(uintptr_t tp, uintptr_t lo, size_t size) {
  set_if<uintptr_t>(tp, L.stackblock, lo);
  set_if<size_t>(tp, L.stackblock_size, size);
}

void set_cleanup_jmp_buf(uintptr_t tp, void* buf) { at<void*>(tp, L.cleanup_jmp_buf) = buf; }
void* get_cleanup_jmp_buf(uintptr_t tp) { return at<void*>(tp, L.cleanup_jmp_buf); }
int32_t get_tid(uintptr_t tp) { return at<pid_t>(tp, L.tid); }
void set_tid(uintptr_t tp, int32_t tid) { at<pid_t>(tp, L.tid) = tid; }
void** specific_slot(uintptr_t tp, unsigned idx1st) {
  return &at<void*>(tp, L.specific + idx1st * sizeof(void*));
}
void* specific_1stblock(uintptr_t tp) { return (void*)(tp + L.specific_1stblock); }
void set_tls_g(uintptr_t tp, G* gp) { at<G*>(tp + L.tls_g, 0) = gp; }

void first_run() { ctype_init(); }

void on_exit() {
  call_tls_dtors();
  uselocale(LC_GLOBAL_LOCALE);
}

uintptr_t initial_tp() { return t0; }

void adopt_main(G* g1) {
  if (!kVariantI) at<int>(t0, kTcbMultipleThreads) = 1;
  tls_g = g1;
}

void move_kernel_registrations(uintptr_t s0) {
  // rseq: glibc registered T0's area with the length the probe thread
  // found (init); this Debian 12 build exports __rseq_size = 20, but
  // registered 32.
  if (L.rseq_size && L.rseq_reglen &&
      at<uint32_t>(t0 + L.rseq, 4) != kRseqCpuIdRegistrationFailed) {
    uintptr_t area = t0 + L.rseq;
    long r = sys::rseq((void*)area, L.rseq_reglen, kRseqFlagUnregister, kRseqSig);
    if (r != 0) {
      // Cannot happen if glibc registers every thread alike; the kernel
      // keeps updating T0's area for this M then, which G1 ignores.
      rawlog("goshim: warning: cannot unregister the initial thread's rseq area (%ld)\n", r);
    } else {
      at<uint32_t>(area, 4) = kRseqCpuIdRegistrationFailed;  // G1 asks the vDSO
      uintptr_t s0area = s0 + L.rseq;
      memset((void*)s0area, 0, L.rseq_reglen);
      at<uint32_t>(s0area, 4) = kRseqCpuIdUninitialized;
      sys::rseq((void*)s0area, L.rseq_reglen, 0, kRseqSig);
    }
  }
  sys::set_robust_list((void*)(s0 + L.robust_head), 24);
  at<pid_t>(s0, L.tid) = (pid_t)sys::gettid();
  sys::set_tid_address(&at<pid_t>(s0, L.tid));
}

namespace {


void copy_module(uintptr_t tp, void* ctx) {
  const NewModule* nm = (const NewModule*)ctx;
  if (tp == t0) return;  // glibc initialized main's block (it is on dl_stack_user)
  uintptr_t dest = module_block(tp, nm->offset);
  memcpy((void*)dest, (const void*)nm->image, nm->filesz);
  memset((void*)(dest + nm->filesz), 0, nm->memsz - nm->filesz);
}

// Whether glibc has set up the module's static TLS in the initial thread's
// block (T0, on glibc's list): its bytes there are the image's, then zeros.
bool initialized_in_t0(struct dl_phdr_info* info) {
  const ElfW(Phdr)* ph = nullptr;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_TLS) ph = &info->dlpi_phdr[i];
  if (!ph) return true;  // nothing to copy: note_module says so
  for (struct link_map* lm = _r_debug.r_map; lm; lm = lm->l_next) {
    if (lm->l_addr != info->dlpi_addr) continue;
    if (strcmp(lm->l_name ? lm->l_name : "", info->dlpi_name ? info->dlpi_name : "") != 0)
      continue;
    size_t off = *(size_t*)((uintptr_t)lm + link_map_tls_offset);
    if (off == 0 || off == (size_t)-1) return true;  // not static: note_module says so
    const unsigned char* t = (const unsigned char*)module_block(t0, off);
    if (memcmp(t, (const void*)(info->dlpi_addr + ph->p_vaddr), ph->p_filesz) != 0) return false;
    for (size_t i = ph->p_filesz; i < ph->p_memsz; i++)
      if (t[i]) return false;
    return true;
  }
  return false;
}

// ctx: non-null (before_ctors) to copy only what glibc initialized in T0.
int visit_module(struct dl_phdr_info* info, size_t, void* ctx) {
  size_t modid = info->dlpi_tls_modid;
  if (!modid || modid >= kMaxModid) return 0;
  if (modid_done[modid / 64] & (1ull << (modid % 64))) return 0;
  if (ctx && !initialized_in_t0(info)) return 0;
  // Without a static offset yet the module is looked at again at the next
  // load (a dlopen on another thread may be relocating it now); dynamic
  // TLS meanwhile: __tls_get_addr handles it.
  ModTls t = note_module(info);
  if (t == ModTls::NotStatic) return 0;
  modid_done[modid / 64] |= 1ull << (modid % 64);
  if (t != ModTls::Static && t != ModTls::Unrecorded) return 0;
  // The module's own image: it is loaded now.
  NewModule nm = last_noted;
  for_each_block(copy_module, &nm);
  return 0;
}

}  // namespace

void own_tdata_is_allocator_state() { own_tdata_allocator.store(true, std::memory_order_relaxed); }

void after_fork() { dlopen_lock.reset(); }

void after_dlopen() {
  dlopen_lock.lock();
  dl_iterate_phdr(visit_module, nullptr);
  dlopen_lock.unlock();
}

void before_ctors() {
  dlopen_lock.lock();
  static int check = 1;
  dl_iterate_phdr(visit_module, &check);
  dlopen_lock.unlock();
}

namespace {
// tcbhead_t.gscope_flag (x86-64: a fixed ABI, after multiple_threads) and
// its values (sysdeps/x86_64/nptl/tls.h THREAD_GSCOPE_FLAG_*): a thread in
// a symbol lookup sets it USED and, leaving, exchanges it for UNUSED and
// wakes the futex on it if it found WAIT.
constexpr size_t kTcbGscopeFlag = 0x1c;
constexpr int kGscopeUnused = 0, kGscopeUsed = 1, kGscopeWait = 2;

void wait_gscope(uintptr_t tp, void* self) {
  if (tp == t0 || tp == (uintptr_t)self) return;  // glibc waits for T0 itself
  int* f = &at<int>(tp, kTcbGscopeFlag);
  for (;;) {
    int v = __atomic_load_n(f, __ATOMIC_ACQUIRE);
    if (v == kGscopeUnused) return;
    if (v == kGscopeUsed &&
        !__atomic_compare_exchange_n(f, &v, kGscopeWait, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
      continue;
    sys::futex_wait(f, kGscopeWait, nullptr);
  }
}
}  // namespace

void gscope_wait() {
  if (kVariantI) return;
  for_each_block(wait_gscope, (void*)arch::get_tp());
}

void forget_unloaded() {
  uint64_t loaded[kMaxModid / 64] = {};
  dlopen_lock.lock();
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* ctx) -> int {
        size_t modid = info->dlpi_tls_modid;
        if (modid && modid < kMaxModid) ((uint64_t*)ctx)[modid / 64] |= 1ull << (modid % 64);
        return 0;
      },
      loaded);
  for (size_t i = 0; i < kMaxModid / 64; i++) modid_done[i] &= loaded[i];
  dlopen_lock.unlock();
}

}  // namespace goshim::tls
