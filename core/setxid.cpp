// Process-wide credential changes (see setxid.hpp).
#include "core/setxid.hpp"

#include <sys/mman.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include <atomic>
#include <new>

#include "arch/arch.hpp"
#include "core/lock.hpp"
#include "core/privfd.hpp"
#include "core/rawlog.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

constexpr int kSigSetxid = 33;  // glibc's SIGSETXID: programs cannot install it
constexpr unsigned long kSaRestorer = 0x04000000;

struct Cmd {
  long nr, a0, a1, a2;
  long expect;                   // the caller's result
  std::atomic<int32_t> pending;  // handlers still to run (futex word)
  std::atomic<int32_t> failed;   // a handler's result differed
};

Cmd* volatile current;  // the broadcast in progress
Mutex setxid_lock{LockRank::Setxid};  // serializes broadcasts
// Readers-writer gate between M creation (shared) and broadcasts
// (exclusive): a thread created during a broadcast would miss it. A
// creation waiting for the gate goes before the next broadcast
// (waiting): a program changing credentials in a loop would otherwise
// keep sysmon from ever creating an M (it found the gate open only in the
// instant between two broadcasts).
std::atomic<int32_t> creating{0};
std::atomic<int32_t> waiting{0};
std::atomic<bool> broadcasting{false};

struct KernelSigaction {
  void (*handler)(int, siginfo_t*, void*);
  unsigned long flags;
  void (*restorer)();
  uint64_t mask;
};

void handler(int, siginfo_t*, void*) {
  int saved = errno;
  Cmd* c = current;
  if (c) {
    long r = sys::raw3(c->nr, c->a0, c->a1, c->a2);
    if (r != c->expect) c->failed.store(1, std::memory_order_relaxed);
    if (c->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) sys::futex_wake(&c->pending, 1);
  }
  errno = saved;
}

struct linux_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

// Calls fn(tid) for every kernel thread of the process but the caller.
// The list is read on the privfd thread (/proc/self/task must not take a
// number in the program's fd table); fn runs there, and may only make
// system calls. False if the list cannot be read.
template <typename F>
bool for_each_thread(F fn) {
  struct Ctx {
    F* fn;
    long self;
  } ctx = {&fn, sys::gettid()};
  return privfd_run(
             [](void* p) -> long {
               Ctx* c = (Ctx*)p;
               long fd = sys::openat(-100, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
               if (fd < 0) return -1;
               char buf[4096];
               for (;;) {
                 long n = sys::raw3(SYS_getdents64, fd, (long)buf, sizeof buf);
                 if (n <= 0) break;
                 for (long off = 0; off < n;) {
                   linux_dirent64* d = (linux_dirent64*)(buf + off);
                   off += d->d_reclen;
                   long tid = 0;
                   const char* q = d->d_name;
                   if (*q < '0' || *q > '9') continue;
                   while (*q >= '0' && *q <= '9') tid = tid * 10 + (*q++ - '0');
                   if (tid != c->self) (*c->fn)(tid);
                 }
               }
               sys::close((int)fd);
               return 0;
             },
             &ctx) == 0;
}

}  // namespace

void setxid_init() {
  KernelSigaction ka;
  memset(&ka, 0, sizeof ka);
  ka.handler = handler;
  ka.flags = SA_SIGINFO | SA_RESTART | kSaRestorer;
  ka.restorer = goshim_restore_rt;
  ka.mask = ~0ull;  // nothing else runs inside it
  if (sys::raw4(SYS_rt_sigaction, kSigSetxid, (long)&ka, 0, 8) != 0)
    fatal("cannot install the credential broadcast handler");
}

void setxid_after_fork() {
  setxid_lock.reset();
  current = nullptr;
  creating.store(0, std::memory_order_relaxed);
  waiting.store(0, std::memory_order_relaxed);
  broadcasting.store(false, std::memory_order_relaxed);
}

void setxid_thread_create_begin() {
  waiting.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    while (broadcasting.load(std::memory_order_acquire)) sys::sched_yield();
    creating.fetch_add(1, std::memory_order_seq_cst);
    if (!broadcasting.load(std::memory_order_seq_cst)) break;
    creating.fetch_sub(1, std::memory_order_seq_cst);
  }
  waiting.fetch_sub(1, std::memory_order_release);
}

void setxid_thread_create_end() { creating.fetch_sub(1, std::memory_order_release); }

long setxid_all(long nr, long a0, long a1, long a2) {
  MutexGuard g(setxid_lock);
  while (waiting.load(std::memory_order_acquire) != 0) sys::sched_yield();  // creations first
  broadcasting.store(true, std::memory_order_seq_cst);
  while (creating.load(std::memory_order_seq_cst) != 0) sys::sched_yield();
  long r = sys::raw3(nr, a0, a1, a2);  // the caller first: an error changes nothing
  if (r < 0) {
    broadcasting.store(false, std::memory_order_release);
    return r;
  }
  Cmd c;
  c.nr = nr;
  c.a0 = a0;
  c.a1 = a1;
  c.a2 = a2;
  c.expect = r;
  c.failed.store(0);
  current = &c;
  // Signal every thread; list again until no new thread shows up (one
  // created by a foreign thread meanwhile would otherwise be missed). The
  // threads done so far: a bitmap over every possible tid (PID_MAX_LIMIT,
  // 2^22 on 64-bit: 512 KiB of address space, touched only where tids
  // are).
  constexpr long kTidLimit = 1L << 22;
  uint64_t* done = (uint64_t*)sys::mmap(nullptr, kTidLimit / 8, PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (done == MAP_FAILED) {
    broadcasting.store(false, std::memory_order_release);
    fatal("a credential change succeeded in one thread and cannot reach the others (no memory)");
  }
  bool more = true;
  long pid = sys::getpid();
  while (more) {
    more = false;
    c.pending.store(0);
    bool listed = for_each_thread([&](long tid) {
      if (tid <= 0 || tid >= kTidLimit || (done[tid / 64] >> (tid % 64) & 1)) return;
      c.pending.fetch_add(1);
      if (sys::tgkill(pid, tid, kSigSetxid) != 0) {
        c.pending.fetch_sub(1);  // it exited meanwhile
        return;
      }
      done[tid / 64] |= 1ull << (tid % 64);
      more = true;
    });
    if (!listed) fatal("setxid: cannot list /proc/self/task");
    int32_t p;
    while ((p = c.pending.load(std::memory_order_acquire)) != 0) sys::futex_wait(&c.pending, (uint32_t)p, nullptr);
  }
  sys::munmap(done, kTidLimit / 8);
  current = nullptr;
  broadcasting.store(false, std::memory_order_release);
  if (c.failed.load()) fatal("a credential change succeeded in one thread and failed in another");
  return r;
}

}  // namespace goshim
