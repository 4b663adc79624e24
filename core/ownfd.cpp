// goshim's own fds (see ownfd.hpp).
#include "core/ownfd.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "syscalls/sys.hpp"
#include "syscalls/sys_io.hpp"

namespace goshim {

namespace {

constexpr int kMaxVars = 16;
constexpr int kMaxFixed = 8;
constexpr rlim_t kPresizeMax = 65536;  // 512 KiB of kernel memory for the table
std::atomic<std::atomic<int>*> vars[kMaxVars];
std::atomic<int> fixed[kMaxFixed] = {-1, -1, -1, -1, -1, -1, -1, -1};
std::atomic<long> capture_tid{0};

// Where goshim's fds go: below the soft RLIMIT_NOFILE (F_DUPFD fails above
// it), at most near 1024, and above what select() programs usually use.
int base() {
  struct rlimit rl;
  if (sys::raw4(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, (long)&rl) < 0) return 256;
  long cur = rl.rlim_cur > 1024 ? 1024 : (long)rl.rlim_cur;
  return (int)(cur - cur / 16);
}

}  // namespace

int ownfd_place(int fd) {
  if (fd < 0) return fd;
  long h = sys::fcntl(fd, F_DUPFD_CLOEXEC, base());
  if (h < 0) return fd;
  sys::close(fd);
  return (int)h;
}

void ownfd_presize_table() {
  struct rlimit rl;
  if (sys::raw4(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, (long)&rl) < 0) return;
  if (rl.rlim_cur <= 1024 || rl.rlim_cur > kPresizeMax) return;
  // F_DUPFD to the last number: the kernel sizes the table to hold it.
  // (If the program already has that number open, the table holds it.)
  long fd = sys::fcntl(2, F_DUPFD_CLOEXEC, (long)rl.rlim_cur - 1);
  if (fd < 0) fd = sys::fcntl(0, F_DUPFD_CLOEXEC, (long)rl.rlim_cur - 1);
  if (fd >= 0) sys::close((int)fd);
}

void ownfd_add(std::atomic<int>* var) {
  for (auto& v : vars) {
    std::atomic<int>* cur = v.load(std::memory_order_acquire);
    if (cur == var) return;
    std::atomic<int>* none = nullptr;
    if (!cur && v.compare_exchange_strong(none, var, std::memory_order_acq_rel)) return;
  }
}

void ownfd_add_fixed(int fd) {
  if (fd < 0) return;
  for (auto& f : fixed) {
    int none = -1;
    if (f.compare_exchange_strong(none, fd, std::memory_order_acq_rel)) return;
  }
}

bool ownfd_is(int fd) {
  if (fd < 0) return false;
  for (auto& v : vars) {
    std::atomic<int>* p = v.load(std::memory_order_acquire);
    if (p && p->load(std::memory_order_relaxed) == fd) return true;
  }
  for (auto& f : fixed)
    if (f.load(std::memory_order_relaxed) == fd) return true;
  return false;
}

long ownfd_vacate(int fd) {
  if (fd < 0) return 0;
  for (auto& v : vars) {
    std::atomic<int>* p = v.load(std::memory_order_acquire);
    if (!p || p->load(std::memory_order_relaxed) != fd) continue;
    long h = sys::fcntl(fd, F_DUPFD_CLOEXEC, base());
    if (h < 0) h = sys::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (h < 0) return h;
    int expect = fd;
    if (!p->compare_exchange_strong(expect, (int)h, std::memory_order_acq_rel)) sys::close((int)h);
  }
  for (auto& f : fixed) {
    int expect = fd;
    f.compare_exchange_strong(expect, -1, std::memory_order_acq_rel);
  }
  return 0;
}

int ownfd_in_range(unsigned lo, unsigned hi, int* out, int max) {
  int n = 0;
  auto add = [&](int fd) {
    if (fd < 0 || (unsigned)fd < lo || (unsigned)fd > hi || n >= max) return;
    int i = n++;
    while (i > 0 && out[i - 1] > fd) {
      out[i] = out[i - 1];
      i--;
    }
    out[i] = fd;
  };
  for (auto& v : vars) {
    std::atomic<int>* p = v.load(std::memory_order_acquire);
    if (p) add(p->load(std::memory_order_relaxed));
  }
  for (auto& f : fixed) add(f.load(std::memory_order_relaxed));
  return n;
}

void ownfd_capture_begin() { capture_tid.store(sys::gettid(), std::memory_order_release); }
void ownfd_capture_end() { capture_tid.store(0, std::memory_order_release); }
bool ownfd_capturing() {
  long t = capture_tid.load(std::memory_order_acquire);
  return t != 0 && t == sys::gettid();
}

}  // namespace goshim
