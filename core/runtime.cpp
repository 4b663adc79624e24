// Runtime start-up, M creation and mstart.
#include "core/runtime.hpp"
#include "core/mcache.hpp"
#include "core/cputime.hpp"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <new>

#include "arch/arch.hpp"
#include "core/config.hpp"
#include "core/contract.hpp"
#include "core/debug.hpp"
#include "core/dlhook.hpp"
#include "core/dump.hpp"
#include "core/fork.hpp"
#include "core/memclass.hpp"
#include "core/netpoll.hpp"
#include "core/ownthread.hpp"
#include "core/ownfd.hpp"
#include "core/privfd.hpp"
#include "core/proc.hpp"
#include "core/cancelproto.hpp"
#include "core/rawlog.hpp"
#include "core/real.hpp"
#include "core/sched.hpp"
#include "core/preempt.hpp"
#include "core/sema.hpp"
#include "core/setxid.hpp"
#include "core/signal.hpp"
#include "core/sysmon.hpp"
#include "core/stack.hpp"
#include "core/tls.hpp"
#include "core/trace.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

std::atomic<bool> runtime_up{false};
std::atomic<bool> runtime_refused{false};
__thread G* tls_g __attribute__((tls_model("initial-exec"))) = nullptr;
uint64_t initial_sigmask = 0;

namespace {

// The process's nice value when the runtime started, as the kernel's
// getpriority answers it (20 - nice; 0 when unknown). Every M runs at it:
// a thread created by one with a real-time policy (a real-time goroutine's
// M, or one raised by priority inheritance, both set with
// SCHED_RESET_ON_FORK) starts at nice 0 (the kernel's sched_fork), so
// under `nice -n 19` the goroutines it ran would run at 0
// (tests/preload/mutex_pi_boost, run niced).
long base_prio = 0;

void m_take_base_nice() {
  if (base_prio <= 0) return;
  if (sys::raw2(SYS_getpriority, PRIO_PROCESS, 0) != base_prio)
    sys::raw3(SYS_setpriority, PRIO_PROCESS, 0, 20 - base_prio);  // may fail below 0 without privilege
}

// Ms come from mmap'd slabs and are never freed (type-stable memory).
M* mslab = nullptr;
int mslab_left = 0;
std::atomic<int32_t> mnext{0};

M* allocm() {
  MutexGuard g(sched.allmlock);
  if (mslab_left == 0) {
    size_t n = 64;
    void* p = sys::mmap(nullptr, n * sizeof(M), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    mslab = (M*)p;
    mslab_left = (int)n;
  }
  M* mp = new (mslab++) M();
  mslab_left--;
  mp->id = mnext.fetch_add(1, std::memory_order_relaxed);
  mp->rand = 0x9E3779B97F4A7C15ull * (uint64_t)(mp->id + 1) ^ (uint64_t)sys::nanotime();
  if (!mp->rand) mp->rand = 1;
  mp->g0.flags = kGFlagG0;
  mp->g0.m = mp;
  mp->g0.status.store(GStatus::Running, std::memory_order_relaxed);
  // Its thread starts with this mask (signal_create_begin). Left at 0, an
  // M being started counted as leaving every signal open: sysmon left
  // the handled ones to it, and a goroutine choosing a signal to deliver
  // waited 10 ms for it to run code of its own (wait_stale_ms).
  mp->cur_sigmask = signal_start_mask();
  signal_m_stack_alloc(mp);  // without one, the M works as before (frames on the G's stack)
  mp->alllink = sched.allm;
  sched.allm = mp;
  sched.mcount++;
  return mp;
}

// Ms whose threads the M starter creates, each holding the P newm kept for
// it (nextp) until it runs; linked through startlink. Locks held:
// sched.lock for all three.
M* mstarting = nullptr;

// The M starter's queue (below).
std::atomic<M*> mstart_queue{nullptr};  // newest first, linked through M::schedlink
std::atomic<uint32_t> mstart_pushes{0};  // the starter sleeps on it
std::atomic<bool> mstarter_up{false};    // the starter runs (cleared in a fork child)
std::atomic<OwnThreadReq*> ownstart_queue{nullptr};  // other threads to start, newest first

void mstarting_unlink_locked(M* mp) {
  for (M** pm = &mstarting; *pm; pm = &(*pm)->startlink)
    if (*pm == mp) {
      *pm = mp->startlink;
      break;
    }
  mp->startlink = nullptr;
  mp->starting = false;
}

// The body of every M but M0: a real pthread that schedules forever.
void* mstart(void* arg) {
  M* mp = (M*)arg;
  tls_g = &mp->g0;  // this kernel thread's own TCB is g0's block
  mp->g0.tp = arch::get_tp();
  mp->tid = (pid_t)sys::gettid();
  mp->pthread = (unsigned long)tls::pthread_of(mp->g0.tp);
  m_take_base_nice();
  cputime_m_start(mp);
  // Every mcall restarts g0 here, below this (never returning) frame.
  mp->g0_sp = (arch::get_sp() - 1024) & ~(uintptr_t)15;
  // The thread started with every signal blocked (signal_create_begin);
  // now that tls_g says g0, it takes its creator's mask with what sysmon
  // takes blocked (signal_new_m_mask), not the process's initial one:
  // signals the program has blocked since must not land on this M.
  signal_m_stack_install(mp);  // before any signal can land here
  uint64_t k = signal_new_m_mask(mp->start_sigmask);
  sys::rt_sigprocmask(SIG_SETMASK, &k, nullptr, 8);
  __atomic_store_n(&mp->cur_sigmask, k, __ATOMIC_RELEASE);
  P* pp;
  if (mp->starting) {
    // Started by the M starter: the P newm kept for it may have been
    // taken back meanwhile (mstart_reclaim_locked); then an idle one, or
    // it waits with the idle Ms.
    sched.lock.lock();
    mstarting_unlink_locked(mp);
    pp = mp->nextp;
    mp->nextp = nullptr;
    if (!pp) pp = pidleget();
    sched.lock.unlock();
  } else {
    pp = mp->nextp;
    mp->nextp = nullptr;
  }
  if (!pp) {
    if (mp->spinning) {
      mp->spinning = false;
      sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst);
    }
    stopm();
    schedule();
  }
  acquirep(pp);
  schedule();
}

}  // namespace

M* allm_head() {
  MutexGuard g(sched.allmlock);
  return sched.allm;
}

namespace {

// After a failure to create a kernel thread, none is tried again before
// this time (sysmon would otherwise retry at every look).
constexpr int64_t kNewmRetryNs = 10 * 1000000;
std::atomic<int64_t> newm_retry_at{0};
std::atomic<bool> newm_warned{false};

// pp (if any) is given back: its queued Gs go to the global queue and pp
// to the idle list.
void newm_free_p(P* pp) {
  GQueue q;
  bool inherit;
  while (G* gp = runqget(pp, &inherit)) q.push_back(gp);
  sched.lock.lock();
  if (!q.empty()) globrunqputbatch(q);
  pidleput(pp);
  sched.lock.unlock();
}

// pp gets no kernel thread now: its queued Gs go to the global queue and
// pp to the idle list, and sysmon is asked to start an M for them
// (sysmon_want_m; it also notices such work left behind, sysmon.cpp).
// pp may be null (an M that was to take an idle P when it started).
void newm_release(P* pp, bool spinning, M* mp) {
  if (spinning) sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst);
  if (pp) newm_free_p(pp);
  if (mp) {
    sched.lock.lock();
    sched.mcount--;
    sched.lock.unlock();
  }
  sysmon_want_m();
}

// No kernel thread for pp (RLIMIT_NPROC, no memory): as newm_release; the
// first M that comes back from a blocking call or finds itself without
// work takes the Gs, or sysmon's next try after kNewmRetryNs. The program
// keeps running on the Ms it has, as it would if those were its threads;
// it stalls only while every M is blocked. (Before sysmon retried, the Gs
// waited forever when every other M was idle in stopm.)
void newm_failed(P* pp, bool spinning, M* mp, int err) {
  if (mp) mp->dead = true;
  newm_retry_at.store(sys::nanotime() + kNewmRetryNs, std::memory_order_relaxed);
  newm_release(pp, spinning, mp);
  if (!newm_warned.exchange(true, std::memory_order_relaxed))
    rawlog("goshim: warning: cannot create a kernel thread for an M (%s); goroutines wait "
           "for the busy ones\n", err == EAGAIN ? "EAGAIN: RLIMIT_NPROC or kernel.threads-max"
                                                  : "out of memory");
}

}  // namespace

// Whether this thread may start a kernel thread now. glibc's pthread_create
// allocates (the DTV, with calloc): not from a program signal handler on a
// G, nor on a foreign thread (perhaps in a handler too), which may have
// interrupted the allocator in the middle of an operation on this very
// thread's cache, or while it holds one of its locks. (Elsewhere newm only
// queues the thread's creation for sysmon: a G outside handlers may still
// be inside the program's own allocator, and g0 may run for a G parked
// there.)
static bool newm_context_ok() {
  G* g = getg();
  return g && (g->is_g0() || g->insig == 0);
}

bool newm_retry_due() {
  return sys::nanotime() >= newm_retry_at.load(std::memory_order_relaxed);
}

// pp is an idle P handed to the new M (never the caller's own: the caller
// may hold a P of its own or none, and may or may not be on g0); on
// failure takes sched.lock to give pp back.
void newm(P* pp, bool spinning) {
  if (!newm_context_ok()) {
    newm_release(pp, spinning, nullptr);
    return;
  }
  if (sys::nanotime() < newm_retry_at.load(std::memory_order_relaxed)) {
    newm_failed(pp, spinning, nullptr, EAGAIN);
    return;
  }
  M* mp = allocm();
  if (!mp) {
    newm_failed(pp, spinning, nullptr, ENOMEM);
    return;
  }
  mp->nextp = pp;
  mp->spinning = spinning;
  if (mstarter_up.load(std::memory_order_acquire)) {
    // Never pthread_create here (sched.hpp): the M starter does, with the
    // mask of the thread that asked. That may take a while: glibc's
    // pthread_create callocs through the program's allocator, which waits
    // while the program holds its lock, perhaps the very G that called
    // newm (it blocks in a call inside its allocator, and needs a P when
    // that call returns). pp stays kept for the M, but a G coming back
    // from a blocking call with no P to be had takes it back
    // (mstart_reclaim_locked).
    sys::rt_sigprocmask(SIG_BLOCK, nullptr, &mp->start_sigmask, 8);
    sched.lock.lock();
    mp->starting = true;
    mp->startlink = mstarting;
    mstarting = mp;
    sched.lock.unlock();
    mstarter_queue(mp);
    return;
  }
  newm_start(mp, false);
}

P* mstart_reclaim_locked() {
  for (M* m = mstarting; m; m = m->startlink)
    if (P* pp = m->nextp) {
      m->nextp = nullptr;
      return pp;
    }
  return nullptr;
}

// ---- the M starter -------------------------------------------------------------
//
// One kernel thread of goshim's own (like sysmon, a g0 without an M) that
// creates every M's kernel thread newm asks for (Go's template thread plays
// this part for threads started from a locked thread). glibc's
// pthread_create callocs the new thread's DTV through the process's
// allocator, the program's own when the executable defines calloc; the
// program may hold that allocator's lock while goshim needs an M (it
// blocks or wakes a thread from inside its allocator: own_malloc_reentry).
// Only this thread then waits for the lock, not the G holding it (which
// would enter the allocator again), not an M's g0 holding a P, and not
// sysmon, whose preemption the holder may need to get a P back (a G that
// computes on the only P).

namespace {

// The starter's queues: lock-free LIFO stacks of requests, linked through
// their member `link`, pushed by anyone and taken whole by the starter.
template <typename T>
void starter_push(std::atomic<T*>& q, T* item, T* T::*link) {
  T* head = q.load(std::memory_order_relaxed);
  do item->*link = head;
  while (!q.compare_exchange_weak(head, item, std::memory_order_release,
                                  std::memory_order_relaxed));
  mstart_pushes.fetch_add(1, std::memory_order_release);
  sys::futex_wake(&mstart_pushes, 1);
}

// A taken stack, oldest first.
template <typename T>
T* oldest_first(T* list, T* T::*link) {
  T* fifo = nullptr;
  while (list) {
    T* next = list->*link;
    list->*link = fifo;
    fifo = list;
    list = next;
  }
  return fifo;
}

void* mstarter_main(void*) {
  // Keeps the mask it started with (signal_create_begin): every signal
  // blocked but the credential broadcast, which must reach it.
  tls_g = sysmon_g();
  mcache_runtime_thread_start();
  for (;;) {
    uint32_t seen = mstart_pushes.load(std::memory_order_acquire);
    M* list = mstart_queue.exchange(nullptr, std::memory_order_acquire);
    OwnThreadReq* reqs = ownstart_queue.exchange(nullptr, std::memory_order_acquire);
    if (!list && !reqs) {
      sys::futex_wait(&mstart_pushes, seen, nullptr);
      continue;
    }
    OwnThreadReq* rfifo = oldest_first(reqs, &OwnThreadReq::next);
    while (rfifo) {
      OwnThreadReq* next = rfifo->next;  // rfifo may be reused once started
      int err = ownthread_start(rfifo->fn, rfifo->arg, rfifo->stack_size);
      if (err != 0 && rfifo->failed) rfifo->failed(rfifo->arg, err);
      rfifo = next;
    }
    M* fifo = oldest_first(list, &M::schedlink);
    while (fifo) {
      M* next = fifo->schedlink;
      fifo->schedlink = nullptr;
      newm_start(fifo, true);
      fifo = next;
    }
  }
}

}  // namespace

bool mstarter_queue(M* mp) {
  if (!mstarter_up.load(std::memory_order_acquire)) return false;
  starter_push(mstart_queue, mp, &M::schedlink);
  return true;
}

bool own_allocator() {
  void* (*mine)(size_t, size_t) = &::calloc;
  return real::calloc && real::calloc != mine;
}

bool ownthread_start_async(OwnThreadReq* req) {
  if (!mstarter_up.load(std::memory_order_acquire)) return false;
  starter_push(ownstart_queue, req, &OwnThreadReq::next);
  return true;
}

void mstarter_start() {
  // Only for a process allocator other than goshim's own jemalloc (whose
  // locks never wake a goroutine: core/jemalloc_glue.cpp): an executable
  // (or a library loaded before libgoshim.so) that defines calloc.
  if (!own_allocator()) return;
  int err = ownthread_start(mstarter_main, nullptr, 64 * 1024);  // mstarter_main sets tls_g first
  // Without it, newm starts threads itself, as it did before.
  if (err == 0) mstarter_up.store(true, std::memory_order_release);
}

void mstarter_after_fork() {
  // The starter did not survive the fork, nor the Ms queued for it (the
  // child's scheduler is rebuilt without them).
  mstarter_up.store(false, std::memory_order_relaxed);
  mstart_queue.store(nullptr, std::memory_order_relaxed);
  ownstart_queue.store(nullptr, std::memory_order_relaxed);
  mstarting = nullptr;
  mstart_pushes.store(0, std::memory_order_relaxed);
}

void newm_start(M* mp, bool mask_known) {
  GOSHIM_NO_LOCKS("newm_start");  // pthread_create callocs
  pid_t tid = 0;
  int err = ownthread_start(mstart, mp, 0, mask_known ? nullptr : &mp->start_sigmask, &tid);
  // Known before the thread runs (mstart stores the same): a real-time
  // waiter can raise the new M that is to run the owner it waits for
  // (core/pi.cpp reconcile: Ms with no G are raised while a boosted G waits in a run queue), else a SCHED_OTHER thread that may not
  // get the CPU at all.
  if (err == 0 && tid) __atomic_store_n(&mp->tid, tid, __ATOMIC_RELEASE);
  if (err != 0) {
    P* pp;
    if (mp->starting) {
      sched.lock.lock();
      mstarting_unlink_locked(mp);
      pp = mp->nextp;
      mp->nextp = nullptr;
      sched.lock.unlock();
    } else {
      pp = mp->nextp;
      mp->nextp = nullptr;
    }
    newm_failed(pp, mp->spinning, mp, err);
  }
}

extern "C" void* __libc_stack_end;  // ld.so's: the initial thread's stack end

namespace {

// Parses "FROM-TO" at the start of a /proc/self/maps line.
bool maps_range(const char* p, const char* end, uintptr_t* from, uintptr_t* to) {
  uintptr_t v[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    const char* start = p;
    for (; p < end; p++) {
      int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
      if (d < 0) break;
      v[k] = v[k] << 4 | (uintptr_t)d;
    }
    if (p == start) return false;
    if (k == 0) {
      if (p == end || *p != '-') return false;
      p++;
    }
  }
  *from = v[0];
  *to = v[1];
  return true;
}

// The initial thread's stack, [*lo, *hi), as glibc's pthread_getattr_np
// computes it for that thread (nptl/pthread_getattr_np.c): it ends at the
// page after __libc_stack_end's; its size is RLIMIT_STACK less what the
// mapping holding __libc_stack_end extends above that end, rounded down to
// a page, and at most the gap down to the mapping below. glibc reads
// /proc/self/maps with stdio and sscanf, and fills the CPU set as well:
// 17 % of a preloaded /bin/true's instructions, and a dozen page faults.
// Without stdio or malloc here. False if it cannot tell (the caller asks
// glibc then).
bool main_stack(uintptr_t* lo, uintptr_t* hi) {
  struct {
    uint64_t cur, max;
  } rl;
  if (sys::raw4(SYS_prlimit64, 0, RLIMIT_STACK, 0, (long)&rl) != 0) return false;
  const uintptr_t ps = page_size();
  const uintptr_t at = (uintptr_t)__libc_stack_end;
  const uintptr_t stack_end = (at & -ps) + ps;
  long fd = sys::openat(AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  char buf[4096];
  size_t have = 0;
  bool eof = false, skipping = false, found = false;
  uintptr_t last_to = 0, found_to = 0;
  while (!found) {
    char* nl = (char*)memchr(buf, '\n', have);
    if (!nl) {
      if (!eof && have < sizeof buf) {
        long n = sys::read((int)fd, buf + have, sizeof buf - have);
        if (n < 0) break;
        if (n == 0) eof = true;
        have += (size_t)n;
        continue;
      }
      if (have == 0) break;  // the end
      if (!eof) {
        // A line longer than the buffer: its start is parsed, the rest skipped.
        if (!skipping) {
          uintptr_t from, to;
          if (maps_range(buf, buf + have, &from, &to)) {
            if (from <= at && at < to) {
              found = true;
              found_to = to;
              break;
            }
            last_to = to;
          }
        }
        skipping = true;
        have = 0;
        continue;
      }
      nl = buf + have;  // a last line without a newline
    }
    if (!skipping) {
      uintptr_t from, to;
      if (maps_range(buf, nl, &from, &to)) {
        if (from <= at && at < to) {
          found = true;
          found_to = to;
          break;
        }
        last_to = to;
      }
    }
    skipping = false;
    size_t used = nl < buf + have ? (size_t)(nl + 1 - buf) : have;
    memmove(buf, buf + used, have - used);
    have -= used;
  }
  sys::close((int)fd);
  if (!found) return false;
  uintptr_t size = (uintptr_t)rl.cur - (found_to - stack_end);
  size &= -ps;
  if (size > stack_end - last_to) size = stack_end - last_to;
  *lo = stack_end - size;
  *hi = stack_end;
  return true;
}

}  // namespace

static void print_stats_mn() { stats_print(true); }
static void print_stats_1to1() { stats_print(false); }

static bool runtime_init_mn();

bool runtime_init() {
  // The allocations of goshim's own start-up on the initial thread (the
  // probe thread's DTV, the Ps' timer heaps, ...) come from arena 0 without
  // a cache: the thread's automatic cache, made at its first allocation,
  // would be left unused from here on (main allocates through M0's cache
  // as G1), and making it cost a mallctl and a dozen pages at every start.
  // The thread turns its cache on at its next allocation if it stays a
  // kernel thread (1:1). A cache made before (a constructor allocated) is
  // used as it is.
  tls_alloc_arena0 = true;
  bool mn = runtime_init_mn();
  tls_alloc_arena0 = false;
  if (mn) return true;
  runtime_refused.store(true, std::memory_order_release);
  fork_init_1to1();
  return false;
}

static bool runtime_init_mn() {
  config_init();
  real::resolve();
  if (config.one_to_one) {
    if (config.stats) {
      debug_init();
      atexit(print_stats_1to1);
    }
    return false;
  }
  arch::init();
  const char* why = nullptr;
  if (!tls::init(&why)) {
    rawlog("goshim: warning: %s; running every thread as a kernel thread (no M:N)\n", why);
    return false;
  }
  {
    char cwhy[200];
    if (!cancel_proto_init(cwhy, sizeof cwhy)) {
      rawlog("goshim: warning: %s; running every thread as a kernel thread (no M:N)\n", cwhy);
      return false;
    }
  }
  stack_init();
  if (config.stack_size) set_default_stack_size(config.stack_size);
  arena_init();

  // Ps.
  sched.gomaxprocs = config.maxprocs;
  void* pmem = sys::mmap(nullptr, sizeof(P) * (size_t)sched.gomaxprocs, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pmem == MAP_FAILED) fatal("cannot allocate Ps");
  for (int i = 0; i < sched.gomaxprocs; i++) {
    P* pp = new ((P*)pmem + i) P();
    pp->id = i;
    timers_init(&pp->timers);
    sched.allp[i].store(pp, std::memory_order_release);
  }
  netpoll_init();
  memclass_init();
  ownfd_presize_table();
  sema_init();

  sys::rt_sigprocmask(SIG_SETMASK, nullptr, &initial_sigmask, 8);

  // M0: this kernel thread. Its g0 gets a fresh TLS block (S0) and stack;
  // main keeps the initial block T0 and the process stack.
  M* m0 = allocm();
  uintptr_t s0 = arena_alloc_tls_only();
  if (!m0 || !s0) fatal("cannot allocate M0");
  m0->g0.vtid = (int32_t)sys::gettid();
  if (!tls::block_init(s0, &m0->g0)) fatal("cannot allocate M0's TLS block");
  m0->g0.tp = s0;
  Stack g0stack;
  if (!stack_alloc(nullptr, 256 * 1024, page_size(), &g0stack)) fatal("cannot allocate g0 stack");
  m0->g0.stack = g0stack;
  tls::set_stack(s0, g0stack.lo, g0stack.hi - g0stack.lo);
  m0->g0_sp = g0stack.hi & ~(uintptr_t)15;
  m0->tid = (pid_t)sys::gettid();
  m0->pthread = (unsigned long)tls::pthread_of(tls::initial_tp());
  base_prio = sys::raw2(SYS_getpriority, PRIO_PROCESS, 0);
  __atomic_store_n(&m0->cur_sigmask, initial_sigmask, __ATOMIC_RELEASE);

  // G1: main, running now on M0. Read its stack while glibc can still
  // answer for the initial thread (before its tid becomes virtual).
  G* g1 = main_g();
  if (!main_stack(&g1->stack.lo, &g1->stack.hi)) {
    pthread_attr_t a;
    if (real::pthread_getattr_np((pthread_t)tls::pthread_of(tls::initial_tp()), &a) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      pthread_attr_getstack(&a, &addr, &size);
      g1->stack.lo = (uintptr_t)addr;
      g1->stack.hi = (uintptr_t)addr + size;
      pthread_attr_destroy(&a);
    }
  }
  g1->tp = tls::initial_tp();
  g1->flags = kGFlagMain;
  g1->goid = 1;
  g1->vtid = 1 << 22;
  g1->magic = kGMagic;
  g1->m = m0;
  g1->started = true;
  g1->sigmask = initial_sigmask;
  signal_g_start(g1);
  g1->status.store(GStatus::Running, std::memory_order_relaxed);
  m0->curg = g1;
  cputime_m_start(m0);  // main's CPU time from the process's start is in M0's first window
  {
    // A sigaltstack set before the runtime started is main's own (G1's);
    // else M0's own signal stack goes in (signal.cpp, "The M's signal
    // stack").
    stack_t cur;
    if (sys::raw2(SYS_sigaltstack, 0, (long)&cur) == 0 && !(cur.ss_flags & SS_DISABLE)) {
      g1->altstack = stack_t{cur.ss_sp, cur.ss_flags & (int)(1U << 31) /* SS_AUTODISARM */, cur.ss_size};
      m0->cur_altstack = g1->altstack;
    } else {
      signal_m_stack_install(m0);
    }
  }
  tls::adopt_main(g1);
  tls::move_kernel_registrations(s0);
  tls::set_tid(g1->tp, g1->vtid);

  sched.lock.lock();
  for (int i = sched.gomaxprocs - 1; i >= 1; i--) pidleput(allp(i));
  sched.lock.unlock();
  acquirep(allp(0));

  // goroutines share memory from now on
  if (char* st = real::lazy::__libc_single_threaded()) *st = 0;  // glibc 2.32+
  sched.ngoroutines.store(1, std::memory_order_relaxed);
  sched.ngpeak.store(1, std::memory_order_relaxed);
  runtime_up.store(true, std::memory_order_release);
  debug_init();
  setxid_init();
  fork_init();
  signal_init();
  dump_init();
  preempt_init();
  {
    // Without it, libc's own dlopen calls do not copy initial-exec TLS
    // (LD_PRELOAD.md 7.20); the program's go through the interposers.
    const char* hwhy = nullptr;
    if (!install_dl_open_hook(&hwhy) && config.stats)
      rawlog("goshim: the dl_open hook is not installed: %s\n", hwhy);
  }
  if (config.trace_file) {
    trace_init(config.trace_file);
    trace_ev(TraceEv::GStart, getg());
  }
  mcache_runtime_arena_init();  // before goshim's own threads start
  // With goshim's allocator the privfd thread starts at the first thread
  // creation (core/privfd.hpp); with the executable's own, now, before
  // sysmon (which reads /proc through it): nowhere later is it known to be
  // outside that allocator.
  if (own_allocator()) privfd_start();
  mstarter_start();
  sysmon_start();
  if (config.stats) atexit(print_stats_mn);
  return true;
}

}  // namespace goshim
