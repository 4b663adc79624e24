// Goroutine waits on process-shared futex words (sync_wait with shared =
// true) without a kernel thread per waiter.
//
// A goroutine parks on core/sema at the word's address, as for a private
// object, so wakes from this process (sync_wake: sema first, the kernel
// only for what sema did not wake) reach it directly. Wakes from other
// processes are futex wakes in the kernel: for them a watcher thread sleeps
// in FUTEX_WAITV on every shared word that has goroutine waiters here (up to
// kSlots words per watcher, plus a private control word that makes it
// rescan its table), so one kernel thread covers many words and any number
// of waiters per word. When the kernel wakes a watcher for a word, it wakes
// every goroutine waiting on that word here (each rechecks its condition:
// a futex wake-up may always be spurious); if there was none, it passes the
// wake on (FUTEX_WAKE of one), since it was meant for another waiter.
//
// The invariant that loses no wake: a goroutine waiting on the word with
// value v was enqueued while the word held v (sema_wait's check). Any later
// change made by another process is either followed by a kernel wake while
// the watcher sleeps on the word (it wakes the goroutines), or happens
// while the watcher is not in the kernel on the word; each round the
// watcher reads every word (process_vm_readv: a word unmapped meanwhile
// gives EFAULT, not a fault) and wakes the goroutines of a word whose value
// differs from the one it last slept on, then sleeps with the value it
// read (FUTEX_WAITV fails with EAGAIN if it changed since). Changes made by
// this process wake through sema and may also make the watcher's next
// round wake the remaining waiters of that word spuriously.
//
// A word's slot stays while it has registered waiters; the watcher frees
// slots without waiters at its next round (a kernel wake it receives for a
// word without waiters is passed on and the slot freed, so two processes'
// watchers cannot pass one wake back and forth).
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
  bool started;
};

Mutex wlock;  // rank: leaf; guards every Watcher's slots and nwatchers
Watcher* watchers[kWatchers];
int nwatchers;
std::atomic<int> available{-1};  // -1 unknown, 0 no FUTEX_WAITV, 1 yes

long futex_waitv(FutexWaitv* v, unsigned n) {
  return sys::raw5(kSysFutexWaitv, (long)v, (long)n, 0, 0, 0);
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
      if (c != seen[k]) {
        // Changed while this watcher was not sleeping on it: a wake from
        // another process may have been missed by the waiters enqueued
        // before the change.
        sema_wake_stale(addrs[k], c, false);
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
    if (r >= 0 && r < m) {
      // The kernel woke this watcher for addrs[r]. If the word changed
      // since it slept, the wake goes with that change: it is for the
      // goroutines enqueued before it (their value differs); goroutines
      // that came after it saw the new value and were not its target. If
      // the word did not change, it is for any waiter. With no target
      // here the wake is passed on to another kernel waiter.
      uint32_t c;
      int woken = 0;
      if (safe_read(addrs[r], &c)) woken = sema_wake_stale(addrs[r], c, c == (uint32_t)v[r].val);
      if (woken == 0) sys::futex_wake_shared(addrs[r], 1);
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
    Watcher* w = watchers[wi];
    for (int i = 0; i < kSlots; i++) {
      Slot& s = w->slots[i];
      if (s.addr == a) {
        s.nlocal++;
        wlock.unlock();
        return wi * kSlots + i;
      }
      if (!s.addr && free_w < 0 && w->started) {
        free_w = wi;
        free_i = i;
      }
    }
  }
  Watcher* fresh = nullptr;
  if (free_w < 0) {
    if (nwatchers == kWatchers) {
      wlock.unlock();
      return -1;
    }
    wlock.unlock();
    // A new watcher (mmap and a thread: outside the lock).
    void* mem = sys::mmap(nullptr, sizeof(Watcher), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return -1;
    fresh = new (mem) Watcher();
    fresh->started = true;
    fresh->slots[0] = Slot{a, 1, val, false};
    if (!start_watcher(fresh)) {
      sys::munmap(mem, sizeof(Watcher));
      return -1;
    }
    wlock.lock();
    if (nwatchers == kWatchers) {
      // Lost a race for the last place: the thread stays, idle.
      fresh->slots[0].nlocal = 0;
      wlock.unlock();
      return -1;
    }
    // Another goroutine may have added the same word to another watcher
    // meanwhile: harmless (both watch it; each wakes the waiters).
    watchers[nwatchers] = fresh;
    int h = nwatchers * kSlots;
    nwatchers++;
    wlock.unlock();
    return h;
  }
  Watcher* w = watchers[free_w];
  w->slots[free_i] = Slot{a, 1, val, false};
  w->ctl.fetch_add(1, std::memory_order_relaxed);
  wlock.unlock();
  sys::futex_wake(&w->ctl, 1);
  return free_w * kSlots + free_i;
}

void watch_unregister(int handle) {
  if (handle < 0) return;
  wlock.lock();
  Slot& s = watchers[handle / kSlots]->slots[handle % kSlots];
  s.nlocal--;
  wlock.unlock();
}

void watch_after_fork() {
  new (&wlock) Mutex();
  // The parent's watchers are not in the child: forget them (their memory
  // is abandoned).
  for (int i = 0; i < nwatchers; i++) watchers[i] = nullptr;
  nwatchers = 0;
}

}  // namespace goshim
