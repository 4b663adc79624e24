// Private/shared classification of futex words (see memclass.hpp).
//
// The cache is direct-mapped by 64 KiB granule. Each entry holds one
// mapping's range, its class and the generation it was read at, under a
// sequence count: readers never lock; writers (cache fills) serialize on a
// spin lock and bump the sequence around their stores.
#include "core/memclass.hpp"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>

#include <atomic>

#include "core/gmp.hpp"
#include "core/lock.hpp"
#include "core/ownfd.hpp"
#include "core/privfd.hpp"
#include "syscalls/sys.hpp"
#include "syscalls/sys_io.hpp"

namespace goshim {

namespace {

// struct procmap_query (linux/fs.h, Linux 6.11).
struct ProcmapQuery {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start;
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104, "procmap_query ABI");
constexpr unsigned long kProcmapQuery = 0xC0686611;  // _IOWR('f', 17, struct procmap_query)
constexpr uint64_t kVmaShared = 0x08;                // PROCMAP_QUERY_VMA_SHARED

constexpr int kEntries = 256;
constexpr int kGranuleShift = 16;

struct Entry {
  std::atomic<uint32_t> seq{0};  // odd while being written
  std::atomic<uintptr_t> lo{0}, hi{0};
  std::atomic<uint64_t> gen{0};
  std::atomic<bool> shared{false};
};

Entry cache[kEntries];
SpinLock fill_lock;                     // rank: leaf
std::atomic<uint64_t> generation{1};    // 0 never matches
std::atomic<int> procmap_query_works{1};  // 0 once the kernel said ENOTTY/EINVAL

Entry* entry_of(uintptr_t a) {
  uint64_t g = a >> kGranuleShift;
  return &cache[(g * 0x9E3779B97F4A7C15ull) >> (64 - 8)];
}

inline bool lookup(uintptr_t a, uint64_t gen, bool* shared) {
  Entry* e = entry_of(a);
  uint32_t s1 = e->seq.load(std::memory_order_acquire);
  if (s1 & 1) return false;
  uintptr_t lo = e->lo.load(std::memory_order_relaxed);
  uintptr_t hi = e->hi.load(std::memory_order_relaxed);
  uint64_t g = e->gen.load(std::memory_order_relaxed);
  bool sh = e->shared.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e->seq.load(std::memory_order_relaxed) != s1) return false;
  if (g != gen || a < lo || a >= hi) return false;
  *shared = sh;
  return true;
}

void fill(uintptr_t a, uintptr_t lo, uintptr_t hi, bool shared, uint64_t gen) {
  Entry* e = entry_of(a);
  fill_lock.lock();
  uint32_t s = e->seq.load(std::memory_order_relaxed);
  e->seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e->lo.store(lo, std::memory_order_relaxed);
  e->hi.store(hi, std::memory_order_relaxed);
  e->gen.store(gen, std::memory_order_relaxed);
  e->shared.store(shared, std::memory_order_relaxed);
  e->seq.store(s + 2, std::memory_order_release);
  fill_lock.unlock();
}

int open_maps() {
  return (int)sys::openat(AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
}

// goshim's own /proc/self/maps (core/ownfd.hpp), open from start-up on: a
// cache miss asks it without opening a file (an fd opened on a cache miss
// would take a number in the program's table). -1 before memclass_init.
std::atomic<int> maps_fd{-1};

// PROCMAP_QUERY: 1 found, 0 no mapping there, -1 cannot ask, -2 the
// kernel (or the file) does not know the request.
int query_ioctl(int fd, uintptr_t a, uintptr_t* lo, uintptr_t* hi, bool* shared) {
  ProcmapQuery q = {};
  q.size = sizeof q;
  q.query_addr = a;
  long r = sys::raw3(SYS_ioctl, fd, (long)kProcmapQuery, (long)&q);
  if (r == -ENOENT) return 0;
  if (r < 0) {
    return r == -ENOTTY || r == -EINVAL ? -2 : -1;
  }
  *lo = q.vma_start;
  *hi = q.vma_end;
  *shared = q.vma_flags & kVmaShared;
  return 1;
}

uintptr_t parse_hex(const char*& p, const char* end) {
  uintptr_t v = 0;
  for (; p < end; p++) {
    char c = *p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) break;
    v = v * 16 + (uintptr_t)d;
  }
  return v;
}

// The maps file, line by line ("lo-hi rwsp ..."), until the line holding a.
int query_scan(int fd, uintptr_t a, uintptr_t* lo, uintptr_t* hi, bool* shared) {
  char buf[4096];
  size_t have = 0;
  long off = 0;  // pread: other threads read the same file at once
  bool eof = false;
  for (;;) {
    if (!eof) {
      long n = sys::pread(fd, buf + have, sizeof buf - have, off);
      if (n > 0) off += n;
      if (n < 0) return -1;
      if (n == 0) eof = true;
      have += (size_t)n;
    }
    size_t start = 0;
    for (;;) {
      size_t nl = start;
      while (nl < have && buf[nl] != '\n') nl++;
      if (nl == have && !eof) break;  // an incomplete line: read more
      if (start == have) return 0;
      const char* q = buf + start;
      const char* end = buf + nl;
      uintptr_t l = parse_hex(q, end);
      if (q < end && *q == '-') q++;
      uintptr_t h = parse_hex(q, end);
      if (a >= l && a < h) {
        if (end - q < 5) return -1;
        *lo = l;
        *hi = h;
        *shared = q[4] == 's';  // " rwsp": the fourth permission letter
        return 1;
      }
      if (l > a || nl == have) return 0;  // the file is sorted: passed it
      start = nl + 1;
    }
    if (start == 0 && have == sizeof buf) return -1;  // a line longer than the buffer
    for (size_t i = start; i < have; i++) buf[i - start] = buf[i];
    have -= start;
  }
}

}  // namespace

namespace {

// A cache miss: ask the kernel, remember the answer.
struct Query {
  uintptr_t a, lo, hi;
  bool shared;
};

// Asks the maps file open as fd about q->a. 1 found, 0 unmapped, -1
// cannot tell. *no_ioctl: the file did not know PROCMAP_QUERY.
int query_fd(int fd, Query* q, bool* no_ioctl) {
  int r = -1;
  *no_ioctl = false;
  if (procmap_query_works.load(std::memory_order_relaxed)) {
    r = query_ioctl(fd, q->a, &q->lo, &q->hi, &q->shared);
    *no_ioctl = r == -2;
  }
  if (r < 0) r = query_scan(fd, q->a, &q->lo, &q->hi, &q->shared);
  return r;
}

// An older kernel: from now on the scan.
void ioctl_unknown() { procmap_query_works.store(0, std::memory_order_relaxed); }

// Without goshim's own fd (before start-up, or it could not be opened):
// a file of its own, opened on the privfd thread.
long query_open(void* p) {
  int fd = open_maps();
  if (fd < 0) return -1;
  bool no_ioctl;
  int r = query_fd(fd, (Query*)p, &no_ioctl);
  sys::close(fd);
  if (no_ioctl) ioctl_unknown();
  return r;
}

__attribute__((noinline)) bool classify(uintptr_t a, uint64_t gen) {
  Query q = {a, 0, 0, true};
  long r;
  for (;;) {
    int fd = maps_fd.load(std::memory_order_acquire);
    if (fd < 0) {
      r = privfd_run(query_open, &q);
      break;
    }
    bool no_ioctl;
    r = query_fd(fd, &q, &no_ioctl);
    // The program took the number meanwhile (dup2 onto it: ownfd_vacate
    // moved the file first): what was read may be the program's file.
    if (maps_fd.load(std::memory_order_acquire) == fd) {
      if (no_ioctl) ioctl_unknown();
      break;
    }
  }
  if (r <= 0) return true;  // unmapped (the futex call will fail) or cannot tell
  fill(a, q.lo, q.hi, q.shared, gen);
  return q.shared;
}

}  // namespace

bool memclass_shared(const void* addr) {
  uintptr_t a = (uintptr_t)addr;
  // The calling goroutine's own stack is goshim's private mapping.
  G* gp = getg();
  if (gp && a >= gp->stack.lo && a < gp->stack.hi) return false;
  uint64_t gen = generation.load(std::memory_order_acquire);
  bool shared;
  if (__builtin_expect(lookup(a, gen, &shared), 1)) return shared;
  return classify(a, gen);
}

void memclass_init() {
  // A fork child inherits the parent's file, which describes the parent's
  // memory: each process opens its own.
  int old = maps_fd.exchange(-1, std::memory_order_acq_rel);
  if (old >= 0) sys::close(old);
  int fd = ownfd_place(open_maps());
  if (fd >= 0) {
    maps_fd.store(fd, std::memory_order_release);
    ownfd_add(&maps_fd);
  }
  memclass_mapping_changed();
}

void memclass_mapping_changed() { generation.fetch_add(1, std::memory_order_acq_rel); }

void memclass_use_scan(bool on) {
  procmap_query_works.store(on ? 0 : 1, std::memory_order_relaxed);
  memclass_mapping_changed();
}

}  // namespace goshim
