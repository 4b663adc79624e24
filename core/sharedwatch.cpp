// Goroutine waits on process-shared futex words (sync_wait with shared =
// true) without a kernel thread per waiter.
//
// A goroutine parks on core/sema at the word's address, as for a private
// object, recording the value it expects (SemaWaiter::val), so wakes from
// this process (sync_wake: sema first, the kernel only for what sema did
// not wake) reach it directly. Wakes from other processes are futex wakes
// in the kernel: for them a watcher thread sleeps in FUTEX_WAITV on up to
// kSlots words that have goroutine waiters here and on a private control
// word (bumped when a goroutine is queued). One kernel thread covers 64 words and
// any number of waiters per word. A FUTEX_WAITV return names one woken
// futex while the kernel may have counted wakes of others too, so after
// every return each word is looked at as described below.
//
// On a kernel wake the watcher reads the word (process_vm_readv: a word
// unmapped meanwhile gives EFAULT, not a fault). Changed since it slept:
// the wake goes with that change and is for the goroutines enqueued before
// it (their value differs from the current one); unchanged: for any
// waiter. With no target here it passes the wake on (FUTEX_WAKE of one).
// Every round it also wakes the goroutines whose value differs from the
// current one (a change while it was not in the kernel on the word may
// have carried a wake they missed; woken, they recheck and wait again).
//
// Attribution. FUTEX_WAITV reports one woken futex, the last of the
// vector the kernel took from its queues: a wake of an earlier entry that
// arrives before the watcher leaves the kernel is taken but not reported.
// The control word is entry 0, so a return that reports it woke no watched
// word; entries above the reported one were not woken; those below it may
// have been, and such a wake is seen through the word's value (changed
// since the watcher slept on it). An unreported word back at the value the
// watcher slept on is passed on unless a goroutine here still waits for
// that value (see the loop). Before this, a watcher asleep on a word from
// an earlier wait (no goroutine waiting for the value it slept on) took a
// mutex unlock's wake for the other process together with a control-word
// wake, saw the word "unchanged" and dropped it: sync_pshared (two goshim
// processes ping-ponging a pshared mutex and condvar) parked the helper on
// a free mutex (word 0) in about 1 run in 30 at GOSHIM_MAXPROCS=1, which a
// rescan every 50 ms used to hide; there is no periodic rescan now.
//
// The look and the sleep. A goroutine enqueued after the watcher's look at
// a word (its wake of stale goroutines) and before the watcher is in the
// kernel on it may expect another value than the one the watcher sleeps
// on, and a wake in between (the word changing from the goroutine's value
// and back to the watcher's, e.g. a mutex word 1 -> 2 -> 0 -> 1) reached
// nobody: the goroutine slept on a free mutex (about 1 run in 200 of
// sync_pshared at one processor). So a goroutine, once queued on sema
// (sema_wait's enqueued callback), bumps the control word (watch_kick):
// the watcher then makes a new round whose look finds it queued, wakes it
// if the word no longer holds its value, and otherwise sleeps on that
// value (a later V -> X -> V with the wake unreported is harmless, above).
//
// A word's slot stays while it has registered waiters; the watcher frees
// slots without waiters at its next round.
//
// Thread creation. glibc's pthread_create callocs through the process
// allocator; when that is the program's own (own_allocator: an executable
// that defines calloc), the first shared wait may come from inside that
// allocator with its lock held (its sem_wait or pthread_mutex_lock on a
// shared object), and creating the watcher there would enter the
// allocator again on the same thread. Then the M starter creates watcher
// threads (ownthread_start_async) and, until a watcher with a free slot
// runs, goroutines wait in the kernel on the word itself (watch_register
// refuses): a goroutine parked on sema with no watcher running would miss
// a wake from another process, and the watcher's creation may wait for the
// very allocator lock the waiter holds.
//
// Exit and exec. A wake the watcher took from the kernel and has not yet
// passed on dies with the process: a pool worker whose goroutine had just
// left a semaphore wait exited (os._exit) while its watcher, not yet back
// from the kernel, took the wake of the next sem_post, and the last worker
// slept on a semaphore holding a token (procpool, about 1 run in 25 at 2
// processors under load). So before the process ends or replaces its
// image (watch_quiesce: _exit, _Exit, exit's last destructor, exec), every
// watcher leaves the kernel, passes on each wake it may have taken (a
// spurious wake elsewhere at worst), wakes its goroutines (they wait again
// in the kernel: watch_register refuses while quiesced) and acknowledges.
// A failed exec resumes the watchers (watch_resume).

#include "core/sharedwatch.hpp"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <atomic>
#include <new>

#include "core/config.hpp"
#include "core/contract.hpp"
#include "core/lock.hpp"
#include "core/ownthread.hpp"
#include "core/scstore.hpp"
#include "core/sema.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

constexpr int kSlots = 64;      // shared words per watcher (FUTEX_WAITV takes 128)
constexpr int kWatchers = 64;   // watchers at most
constexpr long kSysFutexWaitv = 449;
constexpr uint32_t kFutex32 = 2;  // FUTEX2_SIZE_U32

struct FutexWaitv {
  uint64_t val;
  uint64_t uaddr;
  uint32_t flags;
  uint32_t reserved;
};

struct Slot {
  const uint32_t* addr = nullptr;  // nullptr: free
  int32_t nlocal = 0;              // registered goroutine waiters
  uint32_t seen = 0;               // the value the watcher last slept on (or the first waiter's)
  bool faulted = false;            // the word could not be read: not watched until freed
};

struct Watcher {
  Slot slots[kSlots];
  std::atomic<uint32_t> ctl;    // private futex: bumped when the table changes
  std::atomic<uint32_t> quiet;  // private futex: 1 once quiesced (out of the kernel's queues)
  bool failed = false;          // its thread could not be created: not used
  // Queued for the M starter (own allocator, "Thread creation"), not yet
  // running: takes no slot. Written under wlock; read without it by
  // watch_quiesce.
  std::atomic<bool> starting;
  OwnThreadReq req{};  // the M starter's request
};

Mutex wlock{LockRank::SharedWatch};  // leaf: guards every Watcher's slots and nwatchers
// Constant-initialized (.bss): a dynamic initializer would touch its 100 KiB
// (25 pages) at every process start.
constinit Watcher watchers[kWatchers];  // [0, nwatchers) in use
std::atomic<int> nwatchers;   // written under wlock; read without it by watch_quiesce
// Private futex: 1 while quiesced (watch_quiesce .. watch_resume).
std::atomic<uint32_t> quiescing;
std::atomic<int> available{-1};  // -1 unknown, 0 no FUTEX_WAITV, 1 yes

// Waits at most timeout_ns (CLOCK_MONOTONIC; 0: no limit).
long futex_waitv(FutexWaitv* v, unsigned n, int64_t timeout_ns = 0) {
  struct timespec ts;
  if (timeout_ns) {
    int64_t t = sys::nanotime() + timeout_ns;
    ts.tv_sec = t / 1000000000;
    ts.tv_nsec = t % 1000000000;
  }
  return sys::raw5(kSysFutexWaitv, (long)v, (long)n, 0, timeout_ns ? (long)&ts : 0,
                   CLOCK_MONOTONIC);
}

// Reads *addr without faulting. Returns false if it is not readable.
bool safe_read(const uint32_t* addr, uint32_t* out) {
  return sys::read_self(out, addr, sizeof *out);
}

// The watcher's part of watch_quiesce, after its last return from the
// kernel (vector v of m words, result r). A goroutine here that a wake was
// relayed to may never run again (the process is ending), so each word
// the kernel may have woken (entries 1..r) gets a wake passed on anyway,
// then every goroutine waiting on a watched word is woken to wait again
// in the kernel. Then it acknowledges and sleeps on a private word until
// watch_resume.
void quiesce(Watcher* w, FutexWaitv* v, int m, long r) {
  GOSHIM_NO_LOCKS("sharedwatch: quiesce");
  for (int k = 0; k < m && r >= 1 && k + 1 <= r; k++)
    sys::futex_wake_shared((const void*)(uintptr_t)v[1 + k].uaddr, 1);
  const uint32_t* addrs[kSlots];
  int n = 0;
  wlock.lock();
  for (int i = 0; i < kSlots; i++)
    if (w->slots[i].addr) addrs[n++] = w->slots[i].addr;
  wlock.unlock();
  for (int k = 0; k < n; k++) sema_wake_stale(addrs[k], 0, true);
  sc_store(w->quiet, 1);
  sys::futex_wake(&w->quiet, INT_MAX);
  while (quiescing.load(std::memory_order_seq_cst)) sys::futex_wait(&quiescing, 1, nullptr);
  sc_store(w->quiet, 0);
}

void* watcher_main(void* arg) {
  Watcher* w = (Watcher*)arg;
  wlock.lock();
  sc_store(w->starting, false);  // [S] before [L] quiescing below
  wlock.unlock();
  // v[0] is the control word, v[1 + k] the k-th watched word: the kernel
  // reports the last woken entry of the vector, so a return with r == 0
  // means that no watched word was woken ("Attribution").
  FutexWaitv v[kSlots + 1];
  int idx[kSlots];
  for (;;) {
    GOSHIM_NO_LOCKS("sharedwatch: watcher round");
    const uint32_t* addrs[kSlots];
    uint32_t seen[kSlots];
    int n = 0;
    wlock.lock();
    uint32_t cv = w->ctl.load(std::memory_order_relaxed);
    for (int i = 0; i < kSlots; i++) {
      Slot& s = w->slots[i];
      if (!s.addr) continue;
      if (s.nlocal == 0) {
        s.addr = nullptr;  // no waiter left: stop watching
        continue;
      }
      if (s.faulted) continue;
      idx[n] = i;
      addrs[n] = s.addr;
      seen[n] = s.seen;
      n++;
    }
    wlock.unlock();
    // Started while quiescing (watch_quiesce did not wait for a watcher
    // still starting): never sleep on a word then. cv was read before
    // quiescing: a quiesce begun after this look bumps ctl and wakes it.
    if (quiescing.load(std::memory_order_seq_cst)) {
      quiesce(w, v, 0, 0);
      continue;
    }
    v[0].val = cv;
    v[0].uaddr = (uint64_t)(uintptr_t)&w->ctl;
    v[0].flags = kFutex32 | FUTEX_PRIVATE_FLAG;
    v[0].reserved = 0;
    int m = 0;
    for (int k = 0; k < n; k++) {
      uint32_t c;
      if (!safe_read(addrs[k], &c)) {
        wlock.lock();
        if (w->slots[idx[k]].addr == addrs[k]) w->slots[idx[k]].faulted = true;
        wlock.unlock();
        sema_wake_stale(addrs[k], 0, true);
        continue;
      }
      // Goroutines enqueued while the word held another value than now
      // may have missed a wake (a change while this watcher was not in the
      // kernel on it): wake them (at worst they wait again).
      sema_wake_stale(addrs[k], c, false);
      if (c != seen[k]) {
        wlock.lock();
        if (w->slots[idx[k]].addr == addrs[k]) w->slots[idx[k]].seen = c;
        wlock.unlock();
      }
      FutexWaitv& e = v[1 + m];
      e.val = c;
      e.uaddr = (uint64_t)(uintptr_t)addrs[k];
      e.flags = kFutex32;
      e.reserved = 0;
      idx[m] = idx[k];
      addrs[m] = addrs[k];
      m++;
    }
    GOSHIM_NO_LOCKS("sharedwatch: watcher sleep");
    long r = futex_waitv(v, (unsigned)m + 1);
    // r >= 1: the word of entry r was woken, and those of entries below it
    // may have been too (the kernel took their wakes from the queue but
    // reports only the last); entries above r were not. r == 0 (the table
    // changed) and errors (EAGAIN: a word changed before the sleep; EINTR;
    // EFAULT, marked next round) woke no word. Each wake taken here is for
    // a goroutine of this process if one waits for it, else passed on
    // (FUTEX_WAKE of one: at worst a spurious wake-up elsewhere):
    //  - changed since the watcher slept on it: for the goroutines
    //    enqueued before the change (their value differs);
    //  - the reported one, unchanged: for any waiter here;
    //  - an unreported one, unchanged: it may or may not have been woken.
    //    If a goroutine here still waits for that value, the word can only
    //    have come back to it (V -> X -> V) through another waiter taking
    //    what the waker posted, and that goroutine waits on, as a kernel
    //    waiter would after a recheck; if none does, the wake (if any) was
    //    for another process and is passed on: dropping it parked
    //    sync_pshared's parent on a free mutex while this watcher slept on
    //    the word from an earlier wait.
    for (int k = 0; k < m && r >= 1 && k + 1 <= r; k++) {
      uint32_t c;
      if (!safe_read(addrs[k], &c)) continue;  // the next round marks it
      uint32_t slept = (uint32_t)v[1 + k].val;
      bool changed = c != slept;
      bool reported = k + 1 == r;
      int woken;
      if (changed || reported)
        woken = sema_wake_stale(addrs[k], c, !changed);
      else
        woken = sema_has_waiter(addrs[k], slept) ? 1 : 0;
      if (woken == 0) sys::futex_wake_shared(addrs[k], 1);
    }
    if (quiescing.load(std::memory_order_seq_cst)) quiesce(w, v, m, r);
  }
  return nullptr;
}

bool start_watcher(Watcher* w) {
  return ownthread_start(watcher_main, w, 64 * 1024) == 0;
}

// The M starter could not create w's thread (it took no slot).
void watcher_start_failed(void* arg, int) {
  Watcher* w = (Watcher*)arg;
  wlock.lock();
  w->failed = true;
  sc_store(w->starting, false);
  wlock.unlock();
}

}  // namespace

bool watch_available() {
  int a = available.load(std::memory_order_relaxed);
  if (a >= 0) return a;
  // An empty vector: EINVAL where the call exists, ENOSYS where it does not.
  long r = futex_waitv(nullptr, 0);
  a = r == -ENOSYS ? 0 : 1;
  available.store(a, std::memory_order_relaxed);
  return a;
}

int watch_register(const void* addr, uint32_t val) {
  GOSHIM_ON_USER_G();
  GOSHIM_NO_LOCKS("watch_register");
  const uint32_t* a = (const uint32_t*)addr;
  if (quiescing.load(std::memory_order_seq_cst)) return -1;
  wlock.lock();
  int free_w = -1, free_i = -1;
  bool starting = false;
  for (int wi = 0, nw = nwatchers.load(std::memory_order_relaxed); wi < nw; wi++) {
    Watcher* w = &watchers[wi];
    if (w->starting.load(std::memory_order_relaxed)) {
      starting = true;  // no slot yet
      continue;
    }
    for (int i = 0; i < kSlots; i++) {
      Slot& s = w->slots[i];
      if (s.addr == a) {
        if (w->failed) {
          wlock.unlock();
          return -1;
        }
        s.nlocal++;
        wlock.unlock();
        return wi * kSlots + i;
      }
      if (!s.addr && free_w < 0 && !w->failed) {
        free_w = wi;
        free_i = i;
      }
    }
  }
  if (free_w >= 0) {
    Watcher* w = &watchers[free_w];
    w->slots[free_i] = Slot{a, 1, val, false};
    wlock.unlock();
    return free_w * kSlots + free_i;
  }
  if (starting || nwatchers.load(std::memory_order_relaxed) == kWatchers) {
    wlock.unlock();
    return -1;  // waits in the kernel until a watcher with room runs
  }
  if (own_allocator()) {
    // The M starter creates the thread ("Thread creation"); this waiter
    // waits in the kernel. In a fork child before its threads are
    // started, nothing is created yet.
    int wi = nwatchers.load(std::memory_order_relaxed);
    Watcher* w = &watchers[wi];
    w->req = OwnThreadReq{watcher_main, w, 64 * 1024, watcher_start_failed, nullptr};
    sc_store(w->starting, true);
    if (!ownthread_start_async(&w->req)) {
      w->starting.store(false, std::memory_order_relaxed);
      wlock.unlock();
      return -1;
    }
    sc_store(nwatchers, wi + 1);
    wlock.unlock();
    return -1;
  }
  // A new watcher, its first slot taken now (other goroutines waiting on
  // the same word join it); its thread is created outside the lock.
  int wi = nwatchers.load(std::memory_order_relaxed);
  Watcher* w = &watchers[wi];
  w->slots[0] = Slot{a, 1, val, false};
  sc_store(nwatchers, wi + 1);
  wlock.unlock();
  if (!start_watcher(w)) {
    wlock.lock();
    w->failed = true;
    w->slots[0].nlocal--;
    wlock.unlock();
    // Goroutines that joined the slot meanwhile retry (and wait in the
    // kernel).
    sema_wake_stale(addr, 0, true);
    return -1;
  }
  return wi * kSlots;
}

void watch_kick(void* handle) {
  int h = (int)(intptr_t)handle;
  if (h < 0) return;
  Watcher* w = &watchers[h / kSlots];
  w->ctl.fetch_add(1, std::memory_order_seq_cst);
  sys::futex_wake(&w->ctl, 1);
}

void watch_unregister(int handle) {
  if (handle < 0) return;
  wlock.lock();
  Slot& s = watchers[handle / kSlots].slots[handle % kSlots];
  bool last = --s.nlocal == 0;
  wlock.unlock();
  // No waiter left here: the watcher stops sleeping on the word now, not
  // at its next wake. Asleep on it, it would take a wake of one meant for
  // a waiter in another process (the kernel wakes whichever sleeps first)
  // and pass it on only if it ran again: a process exiting meanwhile (a
  // pool worker at shutdown) lost it, and the other process's waiter slept
  // on a semaphore holding a token (procpool).
  if (last) watch_kick((void*)(intptr_t)handle);
}

void watch_quiesce() {
#ifdef GOSHIM_DEBUG_BUILD
  // The watchers it waits for take wlock and sema bucket locks: a runtime
  // lock held here would keep them from acknowledging (a second's delay
  // at every exit). Only goshim's code holds runtime locks, so a G outside
  // a program signal handler (where _exit is allowed anywhere) holds none.
  if (G* g = getg(); g && g->insig == 0) GOSHIM_NO_LOCKS("watch_quiesce");
#endif
  int n = nwatchers.load(std::memory_order_seq_cst);
  if (n == 0) return;
  sc_store(quiescing, 1);
  for (int i = 0; i < n; i++) {
    Watcher* w = &watchers[i];
    w->ctl.fetch_add(1, std::memory_order_seq_cst);
    sys::futex_wake(&w->ctl, 1);
  }
  // Each watcher acknowledges within one round. A watcher that is not
  // scheduled within about a second in all (GOSHIM_DEBUG=quiesce=MS; the
  // machine is loaded, or it
  // is stopped) may hold a wake it took from the kernel and not passed on
  // yet, and it may still be queued on its words. Its words then get
  // every waiter woken from here (FUTEX_WAKE of all, in every process):
  // that takes the watcher off each word's queue (it cannot take a later
  // wake: quiescing keeps it from sleeping on a word again), and every
  // other process's waiter, woken, looks at the word again, so whatever
  // wake the watcher held reaches its waiter (a spurious wake-up for the
  // others, which futex users allow). No wake is lost, and the process
  // ends without waiting longer. The slot list is read without wlock
  // (this may run in a signal handler that interrupted its holder): a
  // stale address gets a harmless wake, an unmapped one EFAULT.
  int64_t end = sys::nanotime() + (int64_t)config.quiesce_ms * 1000000;
  for (int i = 0; i < n; i++) {
    Watcher* w = &watchers[i];
    // A watcher still starting never slept on a word; once running it
    // sees quiescing before it would (watcher_main).
    if (w->failed || w->starting.load(std::memory_order_seq_cst)) continue;
    while (w->quiet.load(std::memory_order_seq_cst) == 0) {
      int64_t left = end - sys::nanotime();
      if (left <= 0) {
        for (int k = 0; k < kSlots; k++) {
          const uint32_t* a = __atomic_load_n(&w->slots[k].addr, __ATOMIC_ACQUIRE);
          if (a) sys::futex_wake_shared(a, INT_MAX);
        }
        break;
      }
      struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
      sys::futex_wait(&w->quiet, 0, &ts);
    }
  }
}

void watch_resume() {
  if (!quiescing.load(std::memory_order_seq_cst)) return;
  sc_store(quiescing, 0);
  sys::futex_wake(&quiescing, INT_MAX);
}

void watch_after_fork() {
  wlock.reset();
  // The parent's watcher threads are not in the child.
  int n = nwatchers.load(std::memory_order_relaxed);
  for (int i = 0; i < n; i++) new (&watchers[i]) Watcher();
  nwatchers.store(0, std::memory_order_relaxed);
  quiescing.store(0, std::memory_order_relaxed);
}

}  // namespace goshim
