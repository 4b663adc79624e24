// goshim's file reads outside the program's fd table (see privfd.hpp).
#include "core/privfd.hpp"
#include "core/mcache.hpp"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <atomic>

#include "core/gmp.hpp"
#include "core/jemalloc_glue.hpp"
#include "core/runtime.hpp"
#include "core/sched.hpp"
#include "core/ownthread.hpp"
#include "core/signal.hpp"
#include "core/sysmon.hpp"
#include "syscalls/sys.hpp"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

namespace goshim {

namespace {

// A request, on its caller's stack until done is set.
struct Req {
  Req* next;
  long (*fn)(void*);
  void* arg;
  long result;
  std::atomic<uint32_t> done;  // futex word: 1 when result is set
};

// Requests not yet taken (a stack: pushed by callers, taken whole by the
// thread, so no ABA), and a futex word that changes after every push.
std::atomic<Req*> pending{nullptr};
std::atomic<uint32_t> pushes{0};
// The thread's state (a futex word): kNone until a read needs it,
// kStarting until it has a table of its own, emptied (kRunning), or could
// not make one (kFailed).
constexpr uint32_t kNone = 0, kStarting = 3, kRunning = 1, kFailed = 2;
std::atomic<uint32_t> state{kNone};
__thread bool on_thread;

// Empties this thread's (private) fd table.
bool close_all() {
  if (sys::raw3(SYS_close_range, 0, ~0u, 0) == 0) return true;
  // Kernels before 5.9: every number below the limit.
  struct {
    uint64_t cur, max;
  } lim;
  if (sys::raw4(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, (long)&lim) != 0) return false;
  for (uint64_t fd = 0; fd < lim.cur && fd < (1u << 20); fd++) sys::close((int)fd);
  return true;
}

void* privfd_main(void*) {
  // A g0 without an M (like sysmon's): no program handler runs here. The
  // thread keeps the mask it started with (signal_create_begin): every
  // signal blocked but the credential broadcast, which must reach it.
  tls_g = sysmon_g();
  mcache_runtime_thread_start();
  on_thread = true;
  bool ok = sys::raw1(SYS_unshare, CLONE_FILES) == 0 && close_all();
  state.store(ok ? kRunning : kFailed, std::memory_order_release);
  sys::futex_wake(&state, INT32_MAX);
  if (!ok) return nullptr;
  for (;;) {
    uint32_t seen = pushes.load(std::memory_order_acquire);
    Req* r = pending.exchange(nullptr, std::memory_order_acq_rel);
    if (!r) {
      sys::futex_wait(&pushes, seen, nullptr);
      continue;
    }
    while (r) {
      Req* next = r->next;  // r may be gone once done is set
      r->result = r->fn(r->arg);
      r->done.store(1, std::memory_order_release);
      sys::futex_wake(&r->done, 1);
      r = next;
    }
  }
}

struct ReadArgs {
  const char* path;
  char* buf;
  size_t size;
};

long read_fn(void* p) {
  ReadArgs* a = (ReadArgs*)p;
  long fd = sys::openat(AT_FDCWD, a->path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return fd;
  long n = sys::read((int)fd, a->buf, a->size - 1);
  sys::close((int)fd);
  if (n < 0) return n;
  a->buf[n] = 0;
  return n;
}

}  // namespace

namespace {

// Whether the calling thread may start the thread now: pthread_create
// callocs and takes glibc's locks, so never in a signal handler, under a
// runtime lock or inside the allocator; sysmon may (it starts Ms; its
// reads run while the program runs), a goroutine in the program's own
// context may when the process has others (which could see the number),
// g0 and foreign threads not. The others read on themselves, as before
// the thread runs: the process's only goroutine, inside a call of its own
// (a credential change, a futex word's class), is the only program code
// that could see the number, and it sees it closed again. So a program
// that never makes a thread makes no kernel thread for it either
// (nproc_limit: RLIMIT_NPROC at the process's count, then setuid).
bool may_start() {
  if (!mn_active()) return false;  // before the runtime, or 1:1 for good
  // The executable's own allocator: pthread_create callocs through it, and
  // a caller may hold its lock (own_malloc_reentry hung at p1: the first
  // read came from a wake inside the allocator). The thread is started
  // with the runtime then (privfd_start), as goshim's other threads.
  if (own_allocator()) return false;
  G* gp = tls_g;
  if (gp == nullptr || tls_je_locks_held != 0) return false;
  if (gp == sysmon_g()) return gp->insig == 0;
  if (gp->is_g0() || gp->insig != 0) return false;
  if (sched.ngoroutines.load(std::memory_order_seq_cst) <= 1) return false;
  M* mp = gp->m;
  return mp != nullptr && mp->locks.load(std::memory_order_relaxed) == 0;
}

// Starts the thread if nobody has (or waits for the one starting it);
// returns whether it runs.
bool start_thread(uint32_t s) {
  if (s == kNone && state.compare_exchange_strong(s, kStarting, std::memory_order_acq_rel)) {
    int err = ownthread_start(privfd_main, nullptr, 128 * 1024);  // privfd_main sets tls_g first
    if (err != 0) {
      // No thread to be had now (RLIMIT_NPROC): a later read tries again.
      state.store(kNone, std::memory_order_release);
      sys::futex_wake(&state, INT32_MAX);
      return false;
    }
  }
  // Until it has its own table (or failed): nothing goes on meanwhile that
  // could open a file in the program's.
  while ((s = state.load(std::memory_order_acquire)) == kStarting) sys::futex_wait(&state, s, nullptr);
  return s == kRunning;
}

// Starts the thread (or waits for it) when the caller may; returns
// whether it runs.
bool ensure_running() {
  uint32_t s = state.load(std::memory_order_acquire);
  if (s == kRunning) return true;
  if (s == kFailed || !may_start()) return false;
  return start_thread(s);
}

}  // namespace

void privfd_prepare() { ensure_running(); }

void privfd_before_second_goroutine() {
  uint32_t s = state.load(std::memory_order_acquire);
  if (s == kNone && sched.ngoroutines.load(std::memory_order_acquire) <= 1) start_thread(s);
}

void privfd_start() {
  uint32_t s = state.load(std::memory_order_acquire);
  if (s != kRunning && s != kFailed) start_thread(s);
}

long privfd_run(long (*fn)(void*), void* arg) {
  if (on_thread || !ensure_running()) return fn(arg);
  // The request and what fn writes live in the caller's frames until done
  // is set: nothing may leave them meanwhile (a program handler's
  // siglongjmp, an asynchronous cancellation), or the thread would write
  // into reused stack. Every signal but the credential broadcast waits.
  uint64_t block = ~(1ull << (33 - 1)), saved = 0;
  sys::rt_sigprocmask(SIG_BLOCK, &block, &saved, 8);
  Req r;
  r.fn = fn;
  r.arg = arg;
  r.result = 0;
  r.done.store(0, std::memory_order_relaxed);
  Req* head = pending.load(std::memory_order_relaxed);
  do r.next = head;
  while (!pending.compare_exchange_weak(head, &r, std::memory_order_release,
                                        std::memory_order_relaxed));
  pushes.fetch_add(1, std::memory_order_release);
  sys::futex_wake(&pushes, 1);
  while (r.done.load(std::memory_order_acquire) == 0) sys::futex_wait(&r.done, 0, nullptr);
  sys::rt_sigprocmask(SIG_SETMASK, &saved, nullptr, 8);
  return r.result;
}

long privfd_read(const char* path, char* buf, size_t size) {
  if (size == 0) return -EINVAL;
  ReadArgs a = {path, buf, size};
  return privfd_run(read_fn, &a);
}

bool privfd_on_thread() { return on_thread; }

int privfd_threads() { return state.load(std::memory_order_acquire) == kRunning ? 1 : 0; }

void privfd_after_fork() {
  // The thread did not survive the fork; requests of other threads went
  // with them.
  state.store(kNone, std::memory_order_relaxed);
  pending.store(nullptr, std::memory_order_relaxed);
  pushes.store(0, std::memory_order_relaxed);
}

}  // namespace goshim
