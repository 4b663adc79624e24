// Goroutine waits on process-shared futex words (sync_wait with shared =
// true) without a kernel thread per waiter.
//
// A goroutine parks on core/sema at the word's address, as for a private
// object, recording the value it expects (SemaWaiter::val), so wakes from
// this process (sync_wake: sema first, the kernel only for what sema did
// not wake) reach it directly. Wakes from other processes are futex wakes
// in the kernel: for them a watcher thread sleeps in FUTEX_WAITV on up to
// kSlots words that have goroutine waiters here and on a private control
// word (bumped when a word is added). One kernel thread covers 64 words and
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
// Attribution. FUTEX_WAITV reports one woken futex (the last of the vector
// the kernel unqueued); a wake of another word of the vector that arrives
// before the watcher leaves the kernel is taken from the queue but not
// reported. Such a wake is noticed only through the word's value: changed
// since the watcher slept on it. So the watcher must sleep on the value its
// goroutines expect: at the moment a goroutine's wait is in effect, either
// it expects the value the watcher sleeps on, or the word already differs
// (the goroutine's sema_wait returns EAGAIN, or the round's look wakes it).
// A registration on a word already watched with another value than the
// watcher last read (Slot::seen) makes it read the word again (the control
// word). Without that, a watcher asleep on an old value (a slot kept from
// an earlier wait, the word changed back and forth since) took a mutex
// unlock's wake at the same time as a control-word wake and dropped it as
// "unchanged": sync_pshared (two goshim processes ping-ponging a pshared
// mutex and condvar: the helper unlocks the mutex, then registers its
// condvar wait) lost a cross-process wake in about 1 run in 30 at
// GOSHIM_MAXPROCS=1, the waiter parked on a free mutex (word 0, stale
// value 2) forever. (An earlier version hid this behind a rescan every
// 50 ms.) A word that returns to the value the watcher sleeps on
// (V -> X -> V) with its wake unreported is not seen: for the protocols
// on shared words (mutex, condvar sequence, semaphore, barrier and rwlock
// counters) the value comes back only through another waiter taking what
// was posted, as a kernel waiter would find it on its wake.
//
// A word's slot stays while it has registered waiters; the watcher frees
// slots without waiters at its next round.

#include "core/sharedwatch.hpp"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <atomic>
#include <new>

#include "core/lock.hpp"
#include "core/real.hpp"
#include "core/sema.hpp"
#include "core/setxid.hpp"
#include "core/signal.hpp"
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
  const uint32_t* addr;  // nullptr: free
  int32_t nlocal;        // registered goroutine waiters
  uint32_t seen;         // the value the watcher last slept on (or the first waiter's)
  bool faulted;          // the word could not be read: not watched until freed
};

struct Watcher {
  Slot slots[kSlots];
  std::atomic<uint32_t> ctl;  // private futex: bumped when the table changes
  bool failed;                // its thread could not be created: not used
};

Mutex wlock{LockRank::SharedWatch};  // leaf: guards every Watcher's slots and nwatchers
Watcher watchers[kWatchers];  // [0, nwatchers) in use
int nwatchers;
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
  struct iovec local = {out, sizeof *out};
  struct iovec remote = {(void*)addr, sizeof *addr};
  return sys::raw6(SYS_process_vm_readv, sys::getpid(), (long)&local, 1, (long)&remote, 1, 0) ==
         (long)sizeof *out;
}

void* watcher_main(void* arg) {
  Watcher* w = (Watcher*)arg;
  FutexWaitv v[kSlots + 1];
  int idx[kSlots];
  for (;;) {
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
      v[m].val = c;
      v[m].uaddr = (uint64_t)(uintptr_t)addrs[k];
      v[m].flags = kFutex32;
      v[m].reserved = 0;
      idx[m] = idx[k];
      addrs[m] = addrs[k];
      m++;
    }
    v[m].val = cv;
    v[m].uaddr = (uint64_t)(uintptr_t)&w->ctl;
    v[m].flags = kFutex32 | FUTEX_PRIVATE_FLAG;
    v[m].reserved = 0;
    long r = futex_waitv(v, (unsigned)m + 1);
    // A wake of one futex of the vector ends the wait; wakes of the others
    // that arrive meanwhile are counted by the kernel but reported to
    // nobody. So after any return every word is looked at: a word that
    // changed since this watcher slept on it may have carried a wake, for
    // the goroutines enqueued before the change (their value differs) or,
    // with none here, for another process's waiter (passed on: at worst a
    // spurious wake there). The word the kernel reports woken without a
    // change carries a wake for any waiter.
    for (int k = 0; k < m; k++) {
      uint32_t c;
      if (!safe_read(addrs[k], &c)) continue;  // the next round marks it
      bool changed = c != (uint32_t)v[k].val;
      if (!changed && k != r) continue;
      int woken = sema_wake_stale(addrs[k], c, !changed);
      if (woken == 0) sys::futex_wake_shared(addrs[k], 1);
    }
    // r == m (the table changed), EAGAIN (a word changed: the next round
    // sees it), EINTR, EFAULT (the next round finds the word): rescan.
  }
  return nullptr;
}

bool start_watcher(Watcher* w) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t th;
  setxid_thread_create_begin();
  uint64_t saved = signal_create_begin();  // every signal but SIGSETXID blocked
  int err = real::pthread_create(&th, &attr, watcher_main, w);
  signal_create_end(saved);
  setxid_thread_create_end();
  pthread_attr_destroy(&attr);
  return err == 0;
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
  const uint32_t* a = (const uint32_t*)addr;
  wlock.lock();
  int free_w = -1, free_i = -1;
  for (int wi = 0; wi < nwatchers; wi++) {
    Watcher* w = &watchers[wi];
    for (int i = 0; i < kSlots; i++) {
      Slot& s = w->slots[i];
      if (s.addr == a) {
        if (w->failed) {
          wlock.unlock();
          return -1;
        }
        s.nlocal++;
        // The watcher sleeps on the value it last read (seen); a waiter
        // that expects another one makes it read the word again and sleep
        // on that (see "Attribution" above).
        bool resleep = s.seen != val;
        if (resleep) w->ctl.fetch_add(1, std::memory_order_relaxed);
        wlock.unlock();
        if (resleep) sys::futex_wake(&w->ctl, 1);
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
    w->ctl.fetch_add(1, std::memory_order_relaxed);
    wlock.unlock();
    sys::futex_wake(&w->ctl, 1);
    return free_w * kSlots + free_i;
  }
  if (nwatchers == kWatchers) {
    wlock.unlock();
    return -1;
  }
  // A new watcher, its first slot taken now (other goroutines waiting on
  // the same word join it); its thread is created outside the lock.
  int wi = nwatchers++;
  Watcher* w = &watchers[wi];
  w->slots[0] = Slot{a, 1, val, false};
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

void watch_unregister(int handle) {
  if (handle < 0) return;
  wlock.lock();
  Slot& s = watchers[handle / kSlots].slots[handle % kSlots];
  s.nlocal--;
  wlock.unlock();
}

void watch_after_fork() {
  wlock.reset();
  // The parent's watcher threads are not in the child.
  for (int i = 0; i < nwatchers; i++) new (&watchers[i]) Watcher();
  nwatchers = 0;
}

}  // namespace goshim
