// Address-keyed parking (see sema.hpp).
//
// A bucket holds a short list of queue heads, one per distinct address
// (linked through nextaddr); each head starts a doubly linked FIFO of the
// waiters on that address. The head also records the queue's tail. A
// waiter's record is its G's SemaWaiter (type-stable memory, so a timer
// firing after the wait ended can still look at it safely), or a record on
// a foreign thread's stack (that thread does not return before the record
// is off the queue).
#include "core/sema.hpp"

#include <errno.h>
#include <limits.h>
#include <time.h>

#include <new>

#include "arch/arch.hpp"
#include "core/contract.hpp"
#include "core/mcache.hpp"
#include "core/rawlog.hpp"
#include "core/rtlock.hpp"
#include "core/runtime.hpp"
#include "core/pi.hpp"
#include "core/sched.hpp"
#include "core/scstore.hpp"
#include "core/signal.hpp"
#include "core/tcb.hpp"
#include "core/timer.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

constexpr uint32_t kBuckets = 1 << 12;

// A bucket: its lock and the number of waiters queued in it share one
// word, so that a waiter takes the lock and announces itself with a single
// locked instruction, and everything else about the count happens under
// the lock with plain stores.
//
//   word: bit 0 locked; bits 1..31 waiters queued (nwait)
//
// The lock's critical sections are a few dozen instructions that never
// block, so it spins (then yields the kernel thread) rather than sleeping
// on a futex like Mutex, and unlock is a plain store. A wake reads nwait
// without the lock: a waiter raises it [S] in the same atomic that locks,
// before it checks the futex word [L]; a waker changes the word [S] before
// it reads nwait [L] (a full barrier in between), so one sees the other.
struct alignas(64) Bucket {
  std::atomic<uint32_t> word{0};  // LockRank::SemaBucket
  SemaWaiter* heads = nullptr;

  // add: 2 to announce a waiter along with the lock, else 0.
  void lock(uint32_t add = 0) {
    uint32_t v = word.load(std::memory_order_relaxed) & ~1u;
    if (__builtin_expect(!word.compare_exchange_weak(v, v + 1 + add, std::memory_order_acquire,
                                                     std::memory_order_relaxed),
                         0))
      lock_slow(add);
    lock_rank_acquire(LockRank::SemaBucket, this, false);
  }
  __attribute__((noinline)) void lock_slow(uint32_t add) {
    for (int spins = 0;;) {
      uint32_t v = word.load(std::memory_order_relaxed);
      if (!(v & 1)) {
        if (word.compare_exchange_weak(v, v + 1 + add, std::memory_order_acquire,
                                       std::memory_order_relaxed))
          return;
        continue;
      }
      if (++spins < 200)
        arch::cpu_relax();
      else
        rt_spin_yield();  // the holder's kernel thread may be preempted
    }
  }
  // Locks held: this bucket's (nobody else writes the word meanwhile).
  void unlock() {
    lock_rank_release(LockRank::SemaBucket, this);
    word.store(word.load(std::memory_order_relaxed) & ~1u, std::memory_order_release);
  }
  void add_waiters(int n) {
    word.store(word.load(std::memory_order_relaxed) + 2 * (uint32_t)n, std::memory_order_relaxed);
  }
  uint32_t nwait() const { return word.load(std::memory_order_relaxed) >> 1; }
};

Bucket buckets[kBuckets];

Bucket* bucket_of(const void* addr) {
  uint64_t x = (uint64_t)(uintptr_t)addr;
  x = (x >> 2) * 0x9E3779B97F4A7C15ull;
  return &buckets[x >> (64 - 12)];
}

uint32_t load_word(const void* addr) {
  return __atomic_load_n((const uint32_t*)addr, __ATOMIC_SEQ_CST);
}

// Locks held: b->lock.
SemaWaiter** find_head(Bucket* b, const void* addr) {
  SemaWaiter** pp = &b->heads;
  while (*pp && (*pp)->addr != addr) pp = &(*pp)->nextaddr;
  return pp;
}

// front: w goes ahead of the waiters of its own priority too (a lock
// waiter that was woken and found the lock taken again, as Go's).
// Locks held: b's.
void enqueue(Bucket* b, SemaWaiter* w, bool front = false) {
  GOSHIM_LOCK_HELD(b, "the sema bucket lock");
  SemaWaiter** pp = find_head(b, w->addr);
  SemaWaiter* h = *pp;
  w->next = nullptr;
  // Whether x stays ahead of w.
  auto ahead = [w, front](const SemaWaiter* x) {
    return front ? x->prio > w->prio : x->prio >= w->prio;
  };
  if (!h) {
    w->prev = nullptr;
    w->tail = w;
    w->nextaddr = b->heads;
    b->heads = w;
  } else if (ahead(h->tail)) {
    w->prev = h->tail;
    h->tail->next = w;
    h->tail = w;
    w->nextaddr = nullptr;
  } else {
    // A real-time waiter goes ahead of every waiter of a lower priority
    // (the kernel's futex order: by priority, FIFO within one).
    SemaWaiter* x = h;
    while (ahead(x)) x = x->next;  // stops: the tail is not ahead
    w->next = x;
    w->prev = x->prev;
    if (x == h) {
      w->tail = h->tail;
      w->nextaddr = h->nextaddr;
      h->tail = nullptr;
      h->nextaddr = nullptr;
      *pp = w;
    } else {
      x->prev->next = w;
      w->nextaddr = nullptr;
    }
    x->prev = w;
  }
  // Last, release: a timeout or an interrupt that sees it (acquire) without
  // this bucket's lock sees this wait's addr and seq (sema_timeout).
  w->queued.store(1, std::memory_order_release);
  // The caller counted w in nwait when it locked (before it checked the word).
}

// Locks held: b's.
void dequeue(Bucket* b, SemaWaiter* w) {
  GOSHIM_LOCK_HELD(b, "the sema bucket lock");
  SemaWaiter** pp = find_head(b, w->addr);
  SemaWaiter* h = *pp;
  GOSHIM_CHECK(h != nullptr, "sema: dequeue of a waiter not queued");
  if (h == w) {
    SemaWaiter* n = w->next;
    if (n) {
      n->prev = nullptr;
      n->tail = w->tail;
      n->nextaddr = w->nextaddr;
      *pp = n;
    } else {
      *pp = w->nextaddr;
    }
  } else {
    w->prev->next = w->next;
    if (w->next)
      w->next->prev = w->prev;
    else
      h->tail = w->prev;
  }
  w->next = w->prev = w->nextaddr = w->tail = nullptr;
  w->queued.store(0, std::memory_order_relaxed);
  b->add_waiters(-1);
}

// Wakes w, already dequeued (off the queue, a timeout or an interrupt
// finds it gone, so no lock is needed: sema_wake_handoff releases after
// unlocking, once grant ran). G waiters are collected in *q to be readied
// after any lock is dropped.
void release(SemaWaiter* w, int result, GQueue* q) {
  GOSHIM_DCHECK(!w->queued.load(std::memory_order_relaxed), "sema: release of a queued waiter");
  w->result = result;
  if (w->gp) {
    q->push_back(w->gp);
  } else {
    w->kwake.store(1, std::memory_order_release);
    sys::futex_wake(&w->kwake, 1);  // w may be gone after the store: address only
  }
}

bool unlock_bucket(G*, void* arg) {
  ((Bucket*)arg)->unlock();
  return true;
}

// park's unlockf for a wait that is a cancellation point. gp is already
// marked Waiting [S]; a pthread_cancel sets its canceled bit [S] before it
// looks at the status [L] to interrupt the wait: with the barrier below,
// either the canceler interrupts the wait (after this unlock) or this sees
// the cancellation [L] and the G does not sleep at all.
bool unlock_bucket_cancellable(G* gp, void* arg) {
  Bucket* b = (Bucket*)arg;
  arch::full_barrier();
  if (__builtin_expect(cancel_pending(gp), 0)) {
    dequeue(b, &gp->sw);
    gp->sw.result = EINTR;
    b->unlock();
    return false;  // resume at once
  }
  b->unlock();
  return true;
}

// After the bucket lock is dropped (wake after unlock).
void ready_all(GQueue& q) {
  if (q.size == 1)
    ready(q.pop(), true);
  else
    ready_list(q);
}

// Timer callback of a timed G wait. Runs with a P, no locks held.
void sema_timeout(void* arg, uint64_t seq) {
  G* gp = (G*)arg;
  SemaWaiter* w = &gp->sw;
  for (;;) {
    const void* addr = __atomic_load_n(&w->addr, __ATOMIC_ACQUIRE);
    Bucket* b = bucket_of(addr);
    b->lock();
    // This timer may fire as its wait ends (timer_del does not wait for a
    // running callback): gp may already be in its next wait, which sets
    // addr and seq and then queued (release, in enqueue) under another
    // bucket's lock. So queued first (acquire), then seq and addr: a
    // queued of a later wait comes with that wait's seq. (Checked the
    // other way round, an old seq and the next wait's queued could both be
    // seen, and the waiter "dequeued" from a bucket it is not in.)
    if (!w->queued.load(std::memory_order_acquire) ||
        __atomic_load_n(&w->seq, __ATOMIC_RELAXED) != seq) {
      b->unlock();  // that wait already ended
      return;
    }
    if (__atomic_load_n(&w->addr, __ATOMIC_RELAXED) != addr) {  // requeued meanwhile
      b->unlock();
      continue;
    }
    dequeue(b, w);
    GQueue q;
    release(w, ETIMEDOUT, &q);
    b->unlock();
    ready_all(q);
    return;
  }
}

// A cancellable wait of a kernel thread sleeps at most this long at a
// time: glibc's SIGCANCEL has SA_RESTART, so only a timed futex wait is
// interrupted by it (EINTR), and a cancel sent just before the wait
// started is seen when the slice ends.
constexpr int64_t kCancelSliceNs = 500 * 1000 * 1000;

// Per kernel thread (static TLS: at the same offset from every thread
// pointer, so pthread_cancel finds the target's).
struct ForeignWaitState {
  int on;  // atomic
  pid_t ktid;
  const uint32_t* word;  // atomic: the private word of a wait_foreign, or null
};
__thread ForeignWaitState fwait __attribute__((tls_model("initial-exec")));

// In asynchronous cancellation mode, a kernel thread that waits here
// sleeps this long at a time (its SIGCANCEL is blocked meanwhile, below).
constexpr int64_t kAsyncSliceNs = 20 * 1000 * 1000;

int wait_foreign_locked(const void* addr, uint32_t val, int64_t deadline, uint32_t bitset,
                        const void** endaddr, bool cancellable, bool async,
                        const SemaLockWait* lock) {
  // About to sleep (the word still holds val): a kernel thread that is no
  // M gives its allocator cache back first (core/mcache.hpp), not queued
  // yet, so a wake or a lock hand-over does not wait for it; or, if it
  // did so in vain before, after the first kThreadCacheDeferNs asleep.
  struct CacheSleep {
    CacheIdle idle;
    int64_t t0;
    ~CacheSleep() {
      if (idle == CacheIdle::Released) thread_cache_slept(sys::nanotime() - t0);
    }
  } cs{load_word(addr) == val ? thread_cache_idle() : CacheIdle::None, 0};
  if (cs.idle != CacheIdle::None) cs.t0 = sys::nanotime();
  Bucket* b = bucket_of(addr);
  SemaWaiter w;
  w.addr = addr;
  w.gp = nullptr;
  w.bitset = bitset;
  w.prio = rt_wait_prio();
  w.lock_since = lock ? lock->since : 0;
  w.lock_word = lock ? lock->word : 0;
  b->lock(2);  // [S] nwait + 1 before the value check [L]: pairs with wake
  if (load_word(addr) != val) {
    b->add_waiters(-1);
    b->unlock();
    return EAGAIN;
  }
  enqueue(b, &w, lock && lock->front);  // keeps the nwait count raised above
  b->unlock();
  // pthread_cancel wakes this word (foreign_cancel_kick).
  struct Publish {
    bool on;
    ~Publish() {
      if (on) sc_store(&fwait.word, nullptr);
    }
  } publish{cancellable || async};
  if (publish.on) sc_store(&fwait.word, (const uint32_t*)&w.kwake);
  for (;;) {
    if (w.kwake.load(std::memory_order_acquire)) {
      if (endaddr) *endaddr = __atomic_load_n(&w.addr, __ATOMIC_ACQUIRE);
      return w.result;
    }
    struct timespec ts, *tsp = nullptr;
    int why = 0;  // set when the wait must end without a wake
    if (cancellable && tcb::self_cancel_pending()) why = EINTR;  // the caller acts on it
    if (async && tcb::self_cancel_requested()) why = EINTR;  // SIGCANCEL acts once unblocked
    if (!why && deadline) {
      int64_t left = deadline - sys::nanotime();
      if (left <= 0) {
        why = ETIMEDOUT;
      } else {
        ts.tv_sec = left / 1000000000;
        ts.tv_nsec = left % 1000000000;
        tsp = &ts;
      }
    }
    if (!why && cancellable && (!tsp || ts.tv_sec > 0 || ts.tv_nsec > kCancelSliceNs)) {
      ts.tv_sec = 0;
      ts.tv_nsec = kCancelSliceNs;
      tsp = &ts;
    }
    // A signal handler ran: the kernel restarts an untimed wait itself when
    // the handler has SA_RESTART, as for a plain futex wait; otherwise the
    // wait ends with EINTR. (A cancellable wait is always timed, so every
    // handler ends it: EINTR, which POSIX allows for its callers; in 1:1
    // mode, where every thread waits here, an untimed one goes on when
    // every program handler has SA_RESTART, as glibc's would.)
    bool sliced = false;
    if (!why && async && (!tsp || ts.tv_sec > 0 || ts.tv_nsec > kAsyncSliceNs)) {
      ts.tv_sec = 0;
      ts.tv_nsec = kAsyncSliceNs;
      tsp = &ts;
      sliced = true;
    }
    // The allocator cache's deferred release (above): sleep until it is due.
    if (!why && cs.idle == CacheIdle::Deferred) {
      int64_t left = cs.t0 + kThreadCacheDeferNs - sys::nanotime();
      if (left <= 0) {
        thread_cache_release_now();
        cs.idle = CacheIdle::None;
      } else if (!tsp || ts.tv_sec > 0 || ts.tv_nsec > left) {
        ts.tv_sec = 0;
        ts.tv_nsec = left;
        tsp = &ts;
        sliced = true;
      }
    }
    // (A slice the caller did not ask for ends in EINTR when any handler
    // ran; an untimed non-cancellable wait goes on, as it does natively
    // for the mutexes and the like that use one.)
    if (!why && sys::futex_wait(&w.kwake, 0, tsp) == -EINTR &&
        !(cancellable && !deadline && !mn_active() && signal_handlers_all_restart()) &&
        !(sliced && !cancellable && !deadline))
      why = EINTR;
    if (!why) continue;
    const void* a = __atomic_load_n(&w.addr, __ATOMIC_ACQUIRE);
    b = bucket_of(a);
    b->lock();
    if (w.addr != a) {  // requeued meanwhile: retry with the right bucket
      b->unlock();
      continue;
    }
    if (w.queued.load(std::memory_order_relaxed)) {
      dequeue(b, &w);
      b->unlock();
      if (endaddr) *endaddr = a;
      return why;
    }
    b->unlock();  // woken concurrently: kwake is set
  }
}

// A kernel thread in asynchronous cancellation mode (glibc's SIGCANCEL
// handler unwinds it wherever the signal lands, e.g. in pthread_mutex_lock
// of a 1:1 process) must not be unwound while it holds a bucket lock or is
// queued (its waiter lives on its stack): SIGCANCEL stays blocked from
// before the bucket is locked to after the waiter left the queue, the wait
// sleeps in short slices and ends when a cancellation was requested, and
// unblocking then lets the handler act, as natively, on the caller's side.
int wait_foreign(const void* addr, uint32_t val, int64_t deadline, uint32_t bitset,
                 const void** endaddr, bool cancellable, const SemaLockWait* lock) {
  if (!tcb::self_async_cancel()) {
    if (!cancellable)
      return wait_foreign_locked(addr, val, deadline, bitset, endaddr, false, false, lock);
    ForeignCancelWait mark;
    return wait_foreign_locked(addr, val, deadline, bitset, endaddr, true, false, lock);
  }
  uint64_t block = 1ull << (32 - 1), old = 0;  // glibc's SIGCANCEL
  sys::rt_sigprocmask(SIG_BLOCK, &block, &old, 8);
  int r;
  {
    ForeignCancelWait mark;
    r = wait_foreign_locked(addr, val, deadline, bitset, endaddr, cancellable, true, lock);
  }
  // The handler unwinds this thread as soon as SIGCANCEL opens: a PI
  // mutex wait's record (core/pi.hpp) lives in a frame it removes.
  if (!(old & block) && tcb::self_cancel_requested()) pi_wait_drop_self();
  if (!(old & block)) sys::rt_sigprocmask(SIG_SETMASK, &old, nullptr, 8);
  return r;
}

}  // namespace

ForeignCancelWait::ForeignCancelWait() {
  if (!fwait.ktid) fwait.ktid = (pid_t)sys::gettid();
  // [S] on before [L] cancelhandling in the wait's check; pthread_cancel
  // stores the canceled bit (a locked cmpxchg) before [L] on.
  sc_store(&fwait.on, 1);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

ForeignCancelWait::~ForeignCancelWait() { __atomic_store_n(&fwait.on, 0, __ATOMIC_RELEASE); }

void foreign_cancel_kick(unsigned long t) {
  auto* st = (ForeignWaitState*)(t + ((uintptr_t)&fwait - arch::get_tp()));
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!__atomic_load_n(&st->on, __ATOMIC_ACQUIRE)) return;
  pid_t tid = st->ktid;
  if (tid <= 0) return;
  // A signal that lands between the waiter's check of cancelhandling and
  // its futex call does not end the call: sent again while the waiter is
  // still marked, a few times (each costs the target nothing more than
  // glibc's handler returning), before the slice bounds the wait.
  long pid = sys::getpid();
  for (int i = 0; i < 8; i++) {
    // A private wait's word: woken (spuriously for it: it looks at
    // cancelhandling and goes on); a process-shared wait: the signal.
    // Bit 0: a process-shared word (foreign_cancel_publish_shared).
    if (const uint32_t* w = __atomic_load_n(&st->word, __ATOMIC_SEQ_CST)) {
      if ((uintptr_t)w & 1)
        sys::futex_wake_shared((const uint32_t*)((uintptr_t)w & ~(uintptr_t)1), INT_MAX);
      else
        sys::futex_wake(w, 1);
    }
    if (sys::tgkill(pid, tid, 32) < 0) return;  // glibc's SIGCANCEL; ESRCH: gone
    for (int k = 0; k < 50 && __atomic_load_n(&st->on, __ATOMIC_ACQUIRE); k++) sys::sched_yield();
    if (!__atomic_load_n(&st->on, __ATOMIC_ACQUIRE)) return;
  }
}

void foreign_cancel_publish_shared(const void* word) {
  sc_store(&fwait.word, word ? (const uint32_t*)((uintptr_t)word | 1) : nullptr);
}

void sema_init() { register_wait_interrupter(WaitKind::Sema, sema_interrupt); }

void sema_after_fork() {
  for (Bucket& b : buckets) {
    b.word.store(0, std::memory_order_relaxed);  // unlocked, no waiters
    b.heads = nullptr;
  }
}

int64_t deadline_from_abs(clockid_t clk, const struct timespec* ts) {
  if (!ts) return 0;
  int64_t abs = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
  int64_t mono = sys::nanotime();
  int64_t d;
  if (clk == CLOCK_MONOTONIC) {
    d = abs;
  } else {
    d = mono + (abs - sys::walltime());
  }
  if (d <= 0) d = 1;  // already expired, but distinct from "no deadline"
  return d;
}

// park's unlockf when the waiter asked to be told it is queued (f), or
// when its timer needs the netpoller woken (wake_when): both after the
// bucket lock is dropped. The wake may start a kernel thread (wakep ->
// startm -> newm: pthread_create callocs), which must not happen under the
// bucket lock (the debug build's newm_start check caught sync_futex's
// timed waits doing so).
struct UnlockThen {
  Bucket* b;
  bool cancellable;
  void (*f)(void*);
  void* arg;
  int64_t wake_when;
};
static bool unlock_bucket_then(G* gp, void* arg) {
  // Copied first: once the bucket is unlocked, a waker may ready gp and
  // another M run it, reusing the stack frame that holds *arg.
  UnlockThen u = *(UnlockThen*)arg;
  bool sleep = u.cancellable ? unlock_bucket_cancellable(gp, u.b) : unlock_bucket(gp, u.b);
  if (u.f) u.f(u.arg);
  if (u.wake_when) wake_netpoller(u.wake_when);
  return sleep;
}

int sema_wait(const void* addr, uint32_t val, int64_t deadline, WaitReason reason,
              uint32_t bitset, const void** endaddr, bool cancellable,
              void (*enqueued)(void*), void* earg, const SemaLockWait* lock) {
  if (endaddr) *endaddr = addr;
  if (!can_park()) return wait_foreign(addr, val, deadline, bitset, endaddr, cancellable, lock);
  G* gp = getg();
  Bucket* b = bucket_of(addr);
  b->lock(2);  // [S] nwait + 1 before the value check [L]
  if (load_word(addr) != val) {
    b->add_waiters(-1);
    b->unlock();
    return EAGAIN;
  }
  if (deadline && deadline <= sys::nanotime()) {
    b->add_waiters(-1);
    b->unlock();
    return ETIMEDOUT;
  }
  SemaWaiter* w = &gp->sw;
  w->addr = addr;
  w->gp = gp;
  w->bitset = bitset;
  w->val = val;
  w->prio = 0;
  w->result = 0;
  w->lock_since = lock ? lock->since : 0;
  w->lock_word = lock ? lock->word : 0;
  // Only gp writes parkseq: no read-modify-write needed.
  w->seq = gp->parkseq.load(std::memory_order_relaxed) + 1;
  gp->parkseq.store(w->seq, std::memory_order_relaxed);
  enqueue(b, w, lock && lock->front);  // keeps the nwait count raised above
  gp->wait_kind.store(WaitKind::Sema, std::memory_order_release);
  int64_t wake_when = 0;  // the netpoller is woken after the unlock (UnlockThen)
  if (deadline) {
    gp->timer.f = sema_timeout;
    gp->timer.arg = gp;
    gp->timer.seq = w->seq;
    if (timer_add(&gp->timer, deadline, false)) wake_when = deadline;
  }
  // Futile: woken from this word, the G woke another waiter on it and
  // waits again for the value it found on waking: a herd of waiters
  // waking each other while what they wait for has not happened
  // (InnoDB's read-latch wait). A G that changed the word since (a
  // ping-pong on one word) waits for another value.
  gp->park_futile = addr == gp->sema_last_addr && addr == gp->woke_obj && val == gp->sema_resume_val;
  gp->sema_last_addr = addr;
  gp->woke_obj = nullptr;
  if (enqueued || wake_when) {
    UnlockThen u{b, cancellable, enqueued, earg, wake_when};  // on this G's stack (copied)
    park(unlock_bucket_then, &u, reason, addr);
  } else {
    park(cancellable ? unlock_bucket_cancellable : unlock_bucket, b, reason, addr);
  }
  gp->wait_kind.store(WaitKind::None, std::memory_order_relaxed);
  gp->sema_resume_val = load_word(addr);
  if (deadline) timer_del(&gp->timer);
  if (endaddr) *endaddr = __atomic_load_n(&w->addr, __ATOMIC_ACQUIRE);
  return w->result;
}

// A wake's first look at b: true if it surely has no waiters. Waiters seen
// without a barrier: the bucket lock taken next orders everything. None
// seen: confirmed after a full barrier (the caller's store [S] before [L]).
static inline bool no_waiters(Bucket* b) {
  if (b->nwait() != 0) return false;
  arch::full_barrier();
  return b->nwait() == 0;
}

int sema_wake(const void* addr, int n, uint32_t bitset) {
  Bucket* b = bucket_of(addr);
  if (no_waiters(b)) return 0;
  GQueue q;
  int woken = 0;
  b->lock();
  SemaWaiter* h = *find_head(b, addr);
  for (SemaWaiter* w = h; w && woken < n;) {
    SemaWaiter* next = w->next;
    if (w->bitset & bitset) {
      dequeue(b, w);
      release(w, 0, &q);
      woken++;
    }
    w = next;
  }
  b->unlock();
  ready_all(q);
  if (woken) {
    G* gp = getg();
    if (gp && !gp->is_g0()) gp->woke_obj = addr;  // futile waits (sema_wait)
  }
  return woken;
}

int sema_wake_handoff(const void* addr, void (*grant)(int n, void* arg), void* arg) {
  Bucket* b = bucket_of(addr);
  SemaWaiter* taken = nullptr;  // in queue order, linked through next once off the queue
  SemaWaiter** last = &taken;
  int n = 0;
  if (!no_waiters(b)) {
    b->lock();
    for (SemaWaiter* w = *find_head(b, addr); w;) {
      SemaWaiter* next = w->next;
      dequeue(b, w);  // a timeout or an interrupt now finds it gone
      *last = w;
      last = &w->next;
      n++;
      w = next;
    }
    b->unlock();
  }
  grant(n, arg);  // before any of them runs: a foreign one wakes in release
  GQueue q;
  while (SemaWaiter* w = taken) {
    taken = w->next;
    w->next = nullptr;
    release(w, kSemaHandoff, &q);  // a foreign w may be gone after this
  }
  ready_all(q);
  return n;
}

LockRelease sema_release_lock(uint32_t* word, uint32_t contended, uint32_t unlocked,
                              uint32_t wake_above, LockReleaseInfo* info) {
  Bucket* b = bucket_of(word);
  if (b->nwait() == 0) {
    // Nobody queued in the bucket (a waiter on its way is ordered by
    // sema_wake: it raises nwait before it looks at the word).
    uint32_t old = __atomic_exchange_n(word, unlocked, __ATOMIC_RELEASE);
    int n = old > wake_above ? sema_wake(word, 1) : 0;
    if (info) *info = LockReleaseInfo{old, n > 0};
    return LockRelease::Freed;
  }
  GQueue q;
  LockRelease res = LockRelease::Freed;
  bool woke = false;
  uint32_t old = contended;
  b->lock();
  // Under the bucket lock a waiter is either queued (seen here) or has not
  // looked at the word yet (it finds it changed).
  SemaWaiter* h = *find_head(b, word);
  if (h && h->lock_since && __atomic_load_n(word, __ATOMIC_RELAXED) == contended &&
      sys::nanotime() - h->lock_since >= kLockStarveNs) {
    dequeue(b, h);  // a timeout or an interrupt now finds it gone
    res = h->gp ? LockRelease::HandedToG : LockRelease::HandedToThread;
    // A tid word names the new owner (only the owner changes a locked
    // word's owner bits: waiters only add their flag, by compare-and-swap).
    if (h->lock_word) __atomic_store_n(word, h->lock_word, __ATOMIC_RELEASE);
    release(h, kSemaHandoff, &q);  // a foreign h may be gone after this
    woke = true;
  } else if ((old = __atomic_exchange_n(word, unlocked, __ATOMIC_RELEASE)) > wake_above && h) {
    dequeue(b, h);
    release(h, 0, &q);
    woke = true;
  }
  b->unlock();
  ready_all(q);
  if (info) *info = LockReleaseInfo{old, woke};
  if (woke) {
    G* gp = getg();
    if (gp && !gp->is_g0()) gp->woke_obj = word;  // futile waits (sema_wait)
  }
  return res;
}

int sema_wake_stale(const void* addr, uint32_t cur, bool all) {
  Bucket* b = bucket_of(addr);
  if (no_waiters(b)) return 0;
  GQueue q;
  int woken = 0;
  b->lock();
  for (SemaWaiter* w = *find_head(b, addr); w;) {
    SemaWaiter* next = w->next;
    if (w->gp && (all || w->val != cur)) {
      dequeue(b, w);
      release(w, 0, &q);
      woken++;
    }
    w = next;
  }
  b->unlock();
  ready_all(q);
  return woken;
}

bool sema_has_waiter(const void* addr, uint32_t val) {
  Bucket* b = bucket_of(addr);
  if (no_waiters(b)) return false;
  bool found = false;
  b->lock();
  for (SemaWaiter* w = *find_head(b, addr); w && !found; w = w->next) found = w->gp && w->val == val;
  b->unlock();
  return found;
}

int sema_requeue(const void* from, const void* to, int nwake, int nrequeue, bool check,
                 uint32_t val) {
  Bucket* b1 = bucket_of(from);
  Bucket* b2 = bucket_of(to);
  // (A wake of `to` that reads nwait before the waiters arrive there is
  // ordered before this requeue: it had nothing to wake.)
  if (b1 == b2) {
    b1->lock();
  } else if (b1 < b2) {
    b1->lock();
    b2->lock();
  } else {
    b2->lock();
    b1->lock();
  }
  int done = 0;
  GQueue q;
  if (check && load_word(from) != val) {
    done = -EAGAIN;
  } else {
    SemaWaiter* w = *find_head(b1, from);
    while (w && nwake > 0) {
      SemaWaiter* next = w->next;
      dequeue(b1, w);
      release(w, 0, &q);
      nwake--;
      done++;
      w = next;
    }
    while (w && nrequeue > 0 && from != to) {
      SemaWaiter* next = w->next;
      dequeue(b1, w);
      __atomic_store_n(&w->addr, to, __ATOMIC_RELEASE);
      b2->add_waiters(1);
      enqueue(b2, w);
      nrequeue--;
      done++;
      w = next;
    }
  }
  if (b1 != b2) b2->unlock();
  b1->unlock();
  ready_all(q);
  return done;
}

bool sema_interrupt(G* gp) {
  SemaWaiter* w = &gp->sw;
  for (;;) {
    const void* addr = __atomic_load_n(&w->addr, __ATOMIC_ACQUIRE);
    if (!addr) return false;
    Bucket* b = bucket_of(addr);
    b->lock();
    // queued first (acquire), then addr: gp may be starting another wait
    // under another bucket's lock (see sema_timeout).
    if (!w->queued.load(std::memory_order_acquire) || w->gp != gp) {
      b->unlock();
      return false;
    }
    if (__atomic_load_n(&w->addr, __ATOMIC_RELAXED) != addr) {
      b->unlock();
      continue;
    }
    dequeue(b, w);
    GQueue q;
    release(w, EINTR, &q);
    b->unlock();
    ready_all(q);
    return true;
  }
}

int sema_nwaiters(const void* addr) {
  Bucket* b = bucket_of(addr);
  b->lock();
  int n = 0;
  for (SemaWaiter* w = *find_head(b, addr); w; w = w->next) n++;
  b->unlock();
  return n;
}

}  // namespace goshim
