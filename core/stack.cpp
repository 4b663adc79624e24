// Goroutine stacks (see stack.hpp).
#include "core/stack.hpp"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <new>

#include "arch/arch.hpp"
#include "core/contract.hpp"
#include "core/rawlog.hpp"
#include "syscalls/sys.hpp"
#include "syscalls/sys_io.hpp"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

namespace goshim {

namespace {

size_t g_page = 4096;
std::atomic<size_t> g_default_size{8 << 20};
std::atomic<bool> g_guard_madvise{true};
// Guards of many ranges in one process_madvise call: 1 yes, 0 no, -1 not
// probed yet (madvise_batch_works probes at its first call, which only a
// program that creates a few dozen threads makes).
std::atomic<int> g_madvise_batch{-1};

// A freed stack keeps its descriptor in its own top bytes while pooled.
struct FreeStack {
  FreeStack* next;
  Stack s;
  int64_t freed_at;  // coarse monotonic ns when it entered the pool
};

constexpr int kClasses = 8;
// Each class keeps warm stacks (newest first, so ordered by freed_at) and
// cold ones, whose pages below the top one went back to the kernel.
struct Class {
  size_t size = 0;  // usable bytes
  size_t guard = 0;
  FreeStack* head = nullptr;  // warm
  FreeStack* cold = nullptr;
  int32_t n = 0;  // warm + cold
};

Mutex pool_lock{LockRank::StackPool};
Class classes[kClasses];
// The stacks in the classes. Like glibc's stack cache (40 MiB of stacks,
// __nptl_stack_cache_maxsize), the pool is bounded, so that thousands of
// exited threads leave no memory behind: a stack freed while it holds
// kPoolMaxStacks is unmapped (a cold one first). Bounded by count, not
// size: what a pooled stack costs is the few pages it keeps resident
// (stack_release_unused's, or the top one once cold), at most ~5 MiB for
// the pool, whatever the stack size (glibc's 40 MiB is 5 default stacks).
constexpr int32_t kPoolMaxStacks = 256;
int32_t pool_n = 0;

// Locks held: pool_lock. Pops a stack of class c (warm first).
FreeStack* class_pop(Class* c) {
  GOSHIM_LOCK_HELD(&pool_lock, "pool_lock");
  FreeStack* f = c->head;
  if (f) {
    c->head = f->next;
  } else if ((f = c->cold)) {
    c->cold = f->next;
  }
  if (f) {
    c->n--;
    pool_n--;
  }
  return f;
}

// Pooled stacks idle for kScavengeAfterNs give their pages back (all but
// the top one, which holds the pool's descriptor); sysmon looks every
// kScavengePeriodNs.
constexpr int64_t kScavengeAfterNs = 1000 * 1000 * 1000;
constexpr int64_t kScavengePeriodNs = 100 * 1000 * 1000;

size_t round_page(size_t n) { return (n + g_page - 1) & ~(g_page - 1); }

FreeStack* node_of(const Stack& s) { return (FreeStack*)(s.hi - sizeof(FreeStack)); }

bool map_stack(size_t size, size_t guard, Stack* out) {
  // A signal handler that runs on an overflowed stack (goshim's SIGSEGV
  // wrapper, without a sigaltstack) has its frame pushed below the guard:
  // on aarch64 that frame (about 4.6 KiB) is larger than a 4 KiB guard
  // page, so the kernel (and qemu-user) could write part of it into the
  // mapping below (another goroutine's stack) before faulting. Such a
  // guard is widened, out of sight: Stack::guard stays what was asked.
  size_t mapped_guard = guard;
  if (guard && guard < arch::kMinStackGuard) mapped_guard = round_page(arch::kMinStackGuard);
  size_t total = size + mapped_guard;
  void* p = sys::mmap(nullptr, total, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) return false;
  uintptr_t lo = (uintptr_t)p;
  if (guard) {
    bool ok = false;
    if (g_guard_madvise.load(std::memory_order_relaxed)) {
      long r = sys::madvise(p, mapped_guard, MADV_GUARD_INSTALL);
      if (r == 0)
        ok = true;
      else if (r == -EINVAL)
        g_guard_madvise.store(false, std::memory_order_relaxed);  // kernel < 6.13
    }
    if (!ok && sys::mprotect(p, mapped_guard, PROT_NONE) != 0) {
      sys::munmap(p, total);
      return false;
    }
  }
  out->map_lo = lo;
  out->map_size = total;
  out->guard = guard;
  out->lo = lo + mapped_guard;
  out->hi = lo + total;
  return true;
}

// Whether MADV_GUARD_INSTALL really guards: a kernel without it says
// EINVAL, but qemu-user (7.2) accepts every madvise and does nothing, so
// a stack would have no guard at all. The probe writes a byte from a
// guarded page into a pipe: the kernel refuses (EFAULT) when the guard is
// there.
bool guard_madvise_works() {
  void* p = sys::mmap(nullptr, g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  bool works = false;
  if (sys::madvise(p, g_page, MADV_GUARD_INSTALL) == 0) {
    int fds[2];
    if (sys::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
      works = sys::write(fds[1], p, 1) == -EFAULT;
      sys::close(fds[0]);
      sys::close(fds[1]);
    }
  }
  sys::munmap(p, g_page);
  return works;
}

// The same for guards installed by process_madvise on the process itself
// (a kernel before 6.14 refuses PIDFD_SELF, before 6.13 the advice; an
// emulator may accept it and do nothing). Probed while the program runs,
// so without file descriptors: the kernel reads a signal set from the
// guarded page (blocking nothing if it could: the page holds zeros).
bool guard_batch_works() {
  void* p = sys::mmap(nullptr, g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  struct iovec r = {p, g_page};
  bool works = sys::process_madvise_self(&r, 1, MADV_GUARD_INSTALL) == (long)g_page &&
               sys::rt_sigprocmask(SIG_BLOCK, p, nullptr, 8) == -EFAULT;
  sys::munmap(p, g_page);
  return works;
}

}  // namespace

// Whether the page at p (page aligned, readable) holds only zeros.
// 16-byte loads, one test per KiB: the page looked at is nearly always the
// kernel's zero page, read whole on every goroutine exit.
static bool page_is_zero_sse(uintptr_t p) {
  typedef uint64_t v2 __attribute__((vector_size(16)));
  const v2* w = (const v2*)p;
  size_t n = g_page / sizeof(v2);
  for (size_t i = 0; i < n; i += 64) {
    v2 a = w[i], b = w[i + 1], c = w[i + 2], d = w[i + 3];
    for (size_t j = i + 4; j < i + 64; j += 4) {
      a |= w[j];
      b |= w[j + 1];
      c |= w[j + 2];
      d |= w[j + 3];
    }
    v2 x = (a | b) | (c | d);
    if (x[0] | x[1]) return false;
  }
  return true;
}

#if defined(__x86_64__)
// The same with 32-byte loads where the CPU has AVX2: half the loads
// (create+join in waves: 568 -> ~300 instructions a goroutine).
__attribute__((target("avx2"))) static bool page_is_zero_avx2(uintptr_t p) {
  typedef long long v4 __attribute__((vector_size(32)));
  const v4* w = (const v4*)p;
  size_t n = g_page / sizeof(v4);
  for (size_t i = 0; i < n; i += 32) {
    v4 a = w[i], b = w[i + 1], c = w[i + 2], d = w[i + 3];
    for (size_t j = i + 4; j < i + 32; j += 4) {
      a |= w[j];
      b |= w[j + 1];
      c |= w[j + 2];
      d |= w[j + 3];
    }
    v4 x = (a | b) | (c | d);
    if (!__builtin_ia32_ptestz256(x, x)) return false;
  }
  return true;
}
static bool (*page_is_zero)(uintptr_t) = page_is_zero_sse;  // set by stack_init

// AVX2 usable: the CPU has it and the kernel saves the YMM state. Two
// cpuid instructions, not libgcc's __builtin_cpu_init, whose dozens cost
// tens of microseconds at every process start in a virtual machine (each
// cpuid traps to the hypervisor).
static bool avx2_usable() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  if (!(c & bit_OSXSAVE) || !(c & bit_AVX)) return false;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 6) != 6) return false;  // XMM and YMM state enabled by the kernel
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b & bit_AVX2) != 0;
}
#else
static bool (*const page_is_zero)(uintptr_t) = page_is_zero_sse;
#endif

void stack_init() {
  long ps = sysconf(_SC_PAGESIZE);
  if (ps > 0) g_page = (size_t)ps;
  g_guard_madvise.store(guard_madvise_works(), std::memory_order_relaxed);
#if defined(__x86_64__)
  if (avx2_usable()) page_is_zero = page_is_zero_avx2;
#endif
  // glibc's default: RLIMIT_STACK if set and not unlimited, else 2 MiB on
  // x86-64 (ARCH_STACK_DEFAULT_SIZE), never below PTHREAD_STACK_MIN.
  pthread_attr_t a;
  size_t sz = 0;
  if (pthread_getattr_default_np(&a) == 0) {
    pthread_attr_getstacksize(&a, &sz);
    pthread_attr_destroy(&a);
  }
  if (sz == 0) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      sz = rl.rlim_cur;
    else
      sz = 2 << 20;
  }
  if (sz < 16384) sz = 16384;
  g_default_size.store(round_page(sz), std::memory_order_relaxed);
}

size_t page_size() { return g_page; }

void stack_after_fork() {
  pool_lock.reset();
  for (Class& c : classes) c = Class{};
  pool_n = 0;
}
size_t default_stack_size() { return g_default_size.load(std::memory_order_relaxed); }
void set_default_stack_size(size_t size) {
  g_default_size.store(round_page(size), std::memory_order_relaxed);
}
size_t default_guard_size() { return g_page; }
bool stack_guard_is_madvise() { return g_guard_madvise.load(std::memory_order_relaxed); }
bool madvise_batch_works() {
  int v = g_madvise_batch.load(std::memory_order_relaxed);
  if (v < 0) {
    v = stack_guard_is_madvise() && guard_batch_works();
    g_madvise_batch.store(v, std::memory_order_relaxed);
  }
  return v;
}


void stack_release_unused(const Stack& s, uintptr_t sp) {
  uintptr_t pm = g_page - 1;
  if (sp <= s.lo || sp > s.hi) return;  // not on this stack
  uintptr_t lo = (s.lo + pm) & ~pm;
  uintptr_t end = sp & ~pm;
  if (end <= lo || end - lo <= arch::kGlibcStackMin) return;
  end -= arch::kGlibcStackMin;
  // Most threads never reach below the kept window, and the system call
  // costs about as much as the rest of a goroutine's create and exit
  // (bench/create_join: 243 -> 595 ms CPU for 200,000 threads in waves of
  // 1,000). A stack grows down page by page, so a goroutine that went
  // deeper wrote the page just below the window: when that page holds
  // only zeros (the first look maps the kernel's shared zero page, which
  // costs no memory and stays mapped for the next goroutine on this
  // stack), nothing below it is given back. What this misses, a deep
  // stack whose page there holds only zeros (a zeroed buffer, stack-clash
  // probes), stays until the stack is reused or scavenged as before.
  if (page_is_zero(end - g_page)) return;
  // Fails only where glibc's does too (an mlock'ed stack: EINVAL).
  sys::madvise((void*)lo, end - lo, MADV_DONTNEED);
}

// Locks held: pool_lock. The class for (size, guard), or null.
static Class* find_class(size_t size, size_t guard) {
  GOSHIM_LOCK_HELD(&pool_lock, "pool_lock");
  for (Class& c : classes)
    if (c.size == size && c.guard == guard) return &c;
  return nullptr;
}

bool stack_alloc(P* pp, size_t size, size_t guard, Stack* out) {
  size = round_page(size);
  guard = round_page(guard);
  if (size + guard < size) return false;
  bool dflt = size == default_stack_size() && guard == default_guard_size();
  if (pp && dflt) {
    if (pp->nstackcache == 0) {
      // Refill half the cache in one go.
      pool_lock.lock();
      if (Class* c = find_class(size, guard)) {
        while (pp->nstackcache < P::kStackCache / 2) {
          FreeStack* f = class_pop(c);
          if (!f) break;
          pp->stackcache[pp->nstackcache++] = f->s;
        }
      }
      pool_lock.unlock();
    }
    if (pp->nstackcache > 0) {
      *out = pp->stackcache[--pp->nstackcache];
      return true;
    }
    return map_stack(size, guard, out);
  }
  pool_lock.lock();
  for (Class& c : classes) {
    if (c.size == size && c.guard == guard && (c.head || c.cold)) {
      *out = class_pop(&c)->s;
      pool_lock.unlock();
      return true;
    }
  }
  pool_lock.unlock();
  return map_stack(size, guard, out);
}

static void pool_put_locked(const Stack& s);

void stack_free(P* pp, const Stack& s) {
  size_t size = s.hi - s.lo;
  if (pp && size == default_stack_size() && s.guard == default_guard_size()) {
    if (pp->nstackcache == P::kStackCache) {
      // Full: move half to the global pool in one go.
      pool_lock.lock();
      while (pp->nstackcache > P::kStackCache / 2) pool_put_locked(pp->stackcache[--pp->nstackcache]);
      pool_lock.unlock();
    }
    pp->stackcache[pp->nstackcache++] = s;
    return;
  }
  pool_lock.lock();
  pool_put_locked(s);
  pool_lock.unlock();
}

// Locks held: pool_lock.
static void pool_put_locked(const Stack& s) {
  GOSHIM_LOCK_HELD(&pool_lock, "pool_lock");
  size_t size = s.hi - s.lo;
  Class* slot = nullptr;
  for (Class& c : classes) {
    if (c.size == size && c.guard == s.guard) {
      slot = &c;
      break;
    }
    if (!slot && c.n == 0) slot = &c;
  }
  if (slot && (slot->size != size || slot->guard != s.guard) && slot->n == 0) {
    slot->size = size;
    slot->guard = s.guard;
  }
  if (slot && slot->size == size && slot->guard == s.guard &&
      pool_n >= kPoolMaxStacks) {
    // Full: make room by unmapping cold stacks (of any class) first.
    for (Class& c : classes) {
      while (c.cold && pool_n >= kPoolMaxStacks) {
        FreeStack* f = c.cold;
        c.cold = f->next;
        c.n--;
        pool_n--;
        sys::munmap((void*)f->s.map_lo, f->s.map_size);
      }
    }
    if (pool_n >= kPoolMaxStacks) slot = nullptr;  // unmapped below
  }
  if (slot && slot->size == size && slot->guard == s.guard) {
    FreeStack* f = node_of(s);
    f->s = s;
    f->freed_at = sys::coarsetime();
    f->next = slot->head;
    slot->head = f;
    slot->n++;
    pool_n++;
    return;
  }
  // No class free for this size, or the pool is full: give the memory back.
  sys::munmap((void*)s.map_lo, s.map_size);
}

void stack_scavenge(int64_t now) {
  static int64_t last;
  if (now - last < kScavengePeriodNs) return;
  last = now;
  constexpr int kBatch = 256;
  FreeStack* batch[kBatch];
  for (int ci = 0; ci < kClasses; ci++) {
    int n = 0;
    pool_lock.lock();
    Class* c = &classes[ci];
    // Warm stacks are newest first: if the first one has been idle long
    // enough, so have all the others.
    while (n < kBatch && c->head && now - c->head->freed_at >= kScavengeAfterNs) {
      batch[n++] = c->head;
      pool_n--;
      c->head = c->head->next;
      c->n--;
    }
    pool_lock.unlock();
    if (n == 0) continue;
    // Out of the pool: nobody else can use these while their pages go.
    for (int i = 0; i < n; i++) {
      const Stack& s = batch[i]->s;
      uintptr_t top = (s.hi - sizeof(FreeStack)) & ~(uintptr_t)(g_page - 1);
      if (top > s.lo) sys::madvise((void*)s.lo, top - s.lo, MADV_DONTNEED);
    }
    pool_lock.lock();
    for (int i = 0; i < n; i++) {
      if (c->size != batch[i]->s.hi - batch[i]->s.lo || c->guard != batch[i]->s.guard ||
          pool_n >= kPoolMaxStacks) {
        // The class was emptied and reused for another size meanwhile, or
        // the pool filled up.
        sys::munmap((void*)batch[i]->s.map_lo, batch[i]->s.map_size);
        continue;
      }
      batch[i]->next = c->cold;
      c->cold = batch[i];
      c->n++;
      pool_n++;
    }
    pool_lock.unlock();
  }
}

}  // namespace goshim
