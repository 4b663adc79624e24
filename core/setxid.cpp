// Process-wide credential changes (see setxid.hpp).
#include "core/setxid.hpp"

#include <sys/mman.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <initializer_list>
#include <new>

#include "arch/arch.hpp"
#include "core/lock.hpp"
#include "core/privfd.hpp"
#include "core/procstatus.hpp"
#include "core/rawlog.hpp"
#include "core/real.hpp"
#include "core/scstore.hpp"
#include "core/tls.hpp"
#include "syscalls/sys.hpp"


namespace goshim {

namespace {

constexpr int kSigSetxid = 33;  // glibc's SIGSETXID: programs cannot install it
constexpr unsigned long kSaRestorer = 0x04000000;

constexpr long kTidLimit = 1L << 22;  // PID_MAX_LIMIT on 64-bit

struct Cmd {
  long nr, a0, a1, a2;
  long expect;                   // the caller's result
  std::atomic<int32_t> pending;  // signalled threads not yet accounted for (futex word)
  std::atomic<int32_t> failed;   // a handler's result differed
  // Bitmaps over every possible tid (kTidLimit bits each, touched only
  // where tids are): signalled by this broadcast; accounted for (its
  // handler ran, or it was found gone or out of reach; set by whoever
  // accounts for it first, so that pending drops once per thread).
  std::atomic<uint64_t>* sent;
  std::atomic<uint64_t>* acked;
};

// Claims tid's bit in map; true if this call set it.
bool claim(std::atomic<uint64_t>* map, long tid) {
  uint64_t b = 1ull << (tid % 64);
  return !(map[tid / 64].fetch_or(b, std::memory_order_acq_rel) & b);
}
bool has(std::atomic<uint64_t>* map, long tid) {
  return map[tid / 64].load(std::memory_order_acquire) >> (tid % 64) & 1;
}

Cmd* volatile current;  // the broadcast in progress
// Handlers between their load of current and their last use of it: the
// broadcaster's Cmd lives on its stack, so it waits for them to leave.
std::atomic<int32_t> inside{0};
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

// Makes no libc call and touches no TLS: it may run on a thread of the
// process that libc never set up (one made with a raw clone).
void handler(int, siginfo_t*, void*) {
  inside.fetch_add(1, std::memory_order_seq_cst);
  Cmd* c = current;
  if (c) {
    long r = sys::raw3(c->nr, c->a0, c->a1, c->a2);
    if (r != c->expect) c->failed.store(1, std::memory_order_relaxed);
    long tid = sys::gettid();
    // A signal of an earlier broadcast handled only now (the thread had
    // it blocked) applies this one's change too, but only this one's own
    // signal accounts for the thread.
    if (tid > 0 && tid < kTidLimit && has(c->sent, tid) && claim(c->acked, tid) &&
        c->pending.fetch_sub(1, std::memory_order_acq_rel) == 1)
      sys::futex_wake(&c->pending, 1);
  }
  inside.fetch_sub(1, std::memory_order_seq_cst);
}

// ---- the threads glibc's own broadcast signals ------------------------------
//
// glibc's setuid & co. (nptl/nptl_setxid.c) signal exactly the threads on
// its two thread lists (GL(dl_stack_used), GL(dl_stack_user): every thread
// pthread_create made, and the main thread) and wait for each of them
// without bound. A kernel thread of the process that glibc did not create
// (a raw clone: a JIT's or a static runtime's thread, qemu-user's own
// threads under emulation) is neither signalled nor waited for. The lists
// are read here through libthread_db's descriptors (the offsets a debugger
// uses: _thread_db_rtld_global__dl_stack_used/_user, list_t's next,
// struct pthread's list and tid), every word with process_vm_readv: they
// are read without glibc's lock, so a list changing under the walk ends
// it early at worst (the walk is bounded), never faults.

bool read_word(uintptr_t addr, uintptr_t* out) {
  return sys::read_self(out, (const void*)addr, sizeof *out);
}

// Marks in map the tid of every thread on glibc's lists. False if the
// descriptors are missing or a list could not be walked to its end.
bool glibc_threads(std::atomic<uint64_t>* map) {
  const uint32_t* used = real::lazy::_thread_db_rtld_global__dl_stack_used();
  const uint32_t* user = real::lazy::_thread_db_rtld_global__dl_stack_user();
  const uint32_t* next = real::lazy::_thread_db_list_t_next();
  char* rg = real::lazy::_rtld_global();
  if (!used || !user || !next || !rg) return false;
  bool complete = true;
  for (const uint32_t* d : {used, user}) {
    uintptr_t head = (uintptr_t)rg + d[2];  // {bits, count, offset}
    uintptr_t e = head;
    int steps = 0;
    for (;;) {
      uintptr_t n;
      if (!read_word(e + next[2], &n) || ++steps > 100000) {
        complete = false;
        break;
      }
      if (n == head) break;
      e = n;
      // e is the list member of a struct pthread: tp is e - L.list.
      uintptr_t w;
      if (!read_word(e - tls::L.list + tls::L.tid, &w)) {
        complete = false;
        break;
      }
      long tid = (long)(int32_t)(uint32_t)w;
      if (tid > 0 && tid < kTidLimit) map[tid / 64].fetch_or(1ull << (tid % 64));
    }
  }
  return complete;
}

// What /proc/self/task/TID/status says of a signalled thread that has not
// run the handler yet.
enum class Reach { Gone, Blocked, Stopped, Other };

Reach reach_of(long tid) {
  char path[48];
  rawfmt(path, sizeof path, "/proc/self/task/%ld/status", tid);
  StatusField f[2] = {{"State", 0, 0, false}, {"SigBlk", 16, 0, false}};
  if (!proc_status(path, f, 2)) return Reach::Gone;
  char st = f[0].found ? (char)f[0].value : 0;
  if (st == 'T' || st == 't') return Reach::Stopped;
  if (st == 'Z' || st == 'X') return Reach::Gone;
  if (f[1].found && (f[1].value >> (kSigSetxid - 1) & 1)) return Reach::Blocked;
  return Reach::Other;
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
  // The thread list is read on the privfd thread: start it now if it does
  // not run and is to (a thread started during the broadcast would wait
  // for its end).
  privfd_prepare();
  MutexGuard g(setxid_lock);
  while (waiting.load(std::memory_order_acquire) != 0) sys::sched_yield();  // creations first
  sc_store(broadcasting, true);
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
  sc_store(c.failed, 0);
  sc_store(c.pending, 0);
  // Three bitmaps over every possible tid: sent, acked, and the threads
  // glibc knows (512 KiB of address space each, touched only where tids
  // are).
  constexpr size_t kMap = kTidLimit / 8;
  void* maps = sys::mmap(nullptr, 3 * kMap, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (maps == MAP_FAILED) {
    broadcasting.store(false, std::memory_order_release);
    fatal("a credential change succeeded in one thread and cannot reach the others (no memory)");
  }
  c.sent = (std::atomic<uint64_t>*)maps;
  c.acked = (std::atomic<uint64_t>*)((char*)maps + kMap);
  std::atomic<uint64_t>* glibc = (std::atomic<uint64_t>*)((char*)maps + 2 * kMap);
  bool glibc_known = false;  // the lists were read (else every thread counts as glibc's)
  current = &c;
  // Signal every thread; list again until no new thread shows up (one
  // created by a foreign thread meanwhile would otherwise be missed).
  // Every thread glibc would signal is waited for, as glibc does (a
  // thread that blocks SIGSETXID there stays a hang, as natively). A
  // thread glibc does not know (raw clone) is changed too when it can run
  // the handler, but never waited for where glibc would not wait: gone,
  // stopped, or blocking SIGSETXID (qemu-user's RCU thread, a runtime's
  // signal-masked helper), it is left as glibc leaves it. Whether the
  // signalled threads are in one of these states is looked at whenever
  // the wait makes no progress for a while (a poll: a thread accounted
  // for by it was out of reach when looked at, whatever the timing).
  bool more = true;
  long pid = sys::getpid();
  while (more) {
    more = false;
    long listed_tids[256];
    int nlisted = 0;
    bool overflow = false;
    bool listed = for_each_thread([&](long tid) {
      if (tid <= 0 || tid >= kTidLimit || has(c.sent, tid)) return;
      c.pending.fetch_add(1);
      claim(c.sent, tid);  // before the signal: its handler looks for it
      if (sys::tgkill(pid, tid, kSigSetxid) != 0) {
        if (claim(c.acked, tid)) c.pending.fetch_sub(1);  // it exited meanwhile
        return;
      }
      if (nlisted < 256)
        listed_tids[nlisted++] = tid;
      else
        overflow = true;
      more = true;
    });
    if (!listed) fatal("setxid: cannot list /proc/self/task");
    int64_t poll_ns = 10 * 1000000;
    int32_t p;
    while ((p = c.pending.load(std::memory_order_acquire)) != 0) {
      struct timespec ts = {0, (long)poll_ns};
      long w = sys::futex_wait(&c.pending, (uint32_t)p, &ts);
      if (w != -ETIMEDOUT || c.pending.load(std::memory_order_acquire) != p) continue;
      // No progress: look at the threads of this pass that have not run
      // the handler (a pass with more than 256 new threads looks at all
      // of /proc/self/task).
      if (!glibc_known) glibc_known = glibc_threads(glibc);
      auto look = [&](long tid) {
        if (tid <= 0 || tid >= kTidLimit || !has(c.sent, tid) || has(c.acked, tid)) return;
        Reach how = reach_of(tid);
        bool account = how == Reach::Gone ||
                       (glibc_known && !has(glibc, tid) && how != Reach::Other);
        if (account && claim(c.acked, tid) &&
            c.pending.fetch_sub(1, std::memory_order_acq_rel) == 1)
          sys::futex_wake(&c.pending, 1);
      };
      if (overflow) {
        // More than 256 new threads in this pass: look at all of
        // /proc/self/task (reach_of reads through the privfd thread, so
        // not from inside for_each_thread's function, which runs there).
        static long all[4096];  // under setxid_lock
        int nall = 0;
        if (!for_each_thread([&](long tid) {
              if (nall < 4096) all[nall++] = tid;
            }))
          fatal("setxid: cannot list /proc/self/task");
        for (int i = 0; i < nall; i++) look(all[i]);
      } else {
        for (int i = 0; i < nlisted; i++) look(listed_tids[i]);
      }
      if (poll_ns < 200 * 1000000) poll_ns *= 2;
    }
  }
  current = nullptr;
  while (inside.load(std::memory_order_seq_cst) != 0) sys::sched_yield();
  sys::munmap(maps, 3 * kMap);
  broadcasting.store(false, std::memory_order_release);
  if (c.failed.load()) fatal("a credential change succeeded in one thread and failed in another");
  return r;
}

}  // namespace goshim
