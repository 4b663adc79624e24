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
#include <time.h>

#include <new>

#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "core/timer.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

constexpr uint32_t kBuckets = 1 << 12;

struct alignas(64) Bucket {
  Mutex lock;  // rank: sema bucket
  SemaWaiter* heads = nullptr;
  std::atomic<int32_t> nwait{0};  // waiters queued here; lets wakes skip the lock
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

void enqueue(Bucket* b, SemaWaiter* w) {
  SemaWaiter** pp = find_head(b, w->addr);
  SemaWaiter* h = *pp;
  w->next = nullptr;
  if (!h) {
    w->prev = nullptr;
    w->tail = w;
    w->nextaddr = b->heads;
    b->heads = w;
  } else {
    w->prev = h->tail;
    h->tail->next = w;
    h->tail = w;
    w->nextaddr = nullptr;
  }
  w->queued.store(1, std::memory_order_relaxed);
  // b->nwait was raised by the caller before it checked the word.
}

void dequeue(Bucket* b, SemaWaiter* w) {
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
  b->nwait.fetch_sub(1, std::memory_order_relaxed);
}

// Wakes w, already dequeued. Locks held: the bucket's. G waiters are
// collected in *q to be readied after the lock is dropped.
void release(SemaWaiter* w, int result, GQueue* q) {
  w->result = result;
  if (w->gp) {
    q->push_back(w->gp);
  } else {
    w->kwake.store(1, std::memory_order_release);
    sys::futex_wake(&w->kwake, 1);  // w may be gone after the store: address only
  }
}

bool unlock_bucket(G*, void* arg) {
  ((Bucket*)arg)->lock.unlock();
  return true;
}

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
    b->lock.lock();
    if (w->addr != addr) {  // requeued meanwhile
      b->lock.unlock();
      continue;
    }
    if (w->seq != seq || !w->queued.load(std::memory_order_relaxed)) {
      b->lock.unlock();  // that wait already ended
      return;
    }
    dequeue(b, w);
    GQueue q;
    release(w, ETIMEDOUT, &q);
    b->lock.unlock();
    ready_all(q);
    return;
  }
}

int wait_foreign(const void* addr, uint32_t val, int64_t deadline, uint32_t bitset) {
  Bucket* b = bucket_of(addr);
  SemaWaiter w;
  w.addr = addr;
  w.gp = nullptr;
  w.bitset = bitset;
  b->lock.lock();
  b->nwait.fetch_add(1, std::memory_order_seq_cst);  // before the value check: pairs with wake
  if (load_word(addr) != val) {
    b->nwait.fetch_sub(1, std::memory_order_relaxed);
    b->lock.unlock();
    return EAGAIN;
  }
  enqueue(b, &w);  // keeps the nwait count raised above
  b->lock.unlock();
  for (;;) {
    if (w.kwake.load(std::memory_order_acquire)) return w.result;
    struct timespec ts, *tsp = nullptr;
    if (deadline) {
      int64_t left = deadline - sys::nanotime();
      if (left <= 0) {
        b = bucket_of(__atomic_load_n(&w.addr, __ATOMIC_ACQUIRE));
        b->lock.lock();
        if (w.queued.load(std::memory_order_relaxed)) {
          // Requeued to another bucket meanwhile? Retry with the right one.
          if (bucket_of(w.addr) != b) {
            b->lock.unlock();
            continue;
          }
          dequeue(b, &w);
          b->lock.unlock();
          return ETIMEDOUT;
        }
        b->lock.unlock();
        continue;  // woken concurrently: kwake is set
      }
      ts.tv_sec = left / 1000000000;
      ts.tv_nsec = left % 1000000000;
      tsp = &ts;
    }
    sys::futex_wait(&w.kwake, 0, tsp);
  }
}

}  // namespace

void sema_init() { register_wait_interrupter(WaitKind::Sema, sema_interrupt); }

void sema_after_fork() {
  for (Bucket& b : buckets) {
    new (&b.lock) Mutex();
    b.heads = nullptr;
    b.nwait.store(0, std::memory_order_relaxed);
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

int sema_wait(const void* addr, uint32_t val, int64_t deadline, WaitReason reason,
              uint32_t bitset) {
  G* gp = getg();
  if (!gp || gp->is_g0() || !runtime_up.load(std::memory_order_relaxed))
    return wait_foreign(addr, val, deadline, bitset);
  Bucket* b = bucket_of(addr);
  b->lock.lock();
  b->nwait.fetch_add(1, std::memory_order_seq_cst);  // [S] before the value check [L]
  if (load_word(addr) != val) {
    b->nwait.fetch_sub(1, std::memory_order_relaxed);
    b->lock.unlock();
    return EAGAIN;
  }
  if (deadline && deadline <= sys::nanotime()) {
    b->nwait.fetch_sub(1, std::memory_order_relaxed);
    b->lock.unlock();
    return ETIMEDOUT;
  }
  SemaWaiter* w = &gp->sw;
  w->addr = addr;
  w->gp = gp;
  w->bitset = bitset;
  w->result = 0;
  w->seq = gp->parkseq.fetch_add(1, std::memory_order_relaxed) + 1;
  enqueue(b, w);  // keeps the nwait count raised above
  gp->wait_kind.store(WaitKind::Sema, std::memory_order_release);
  if (deadline) {
    gp->timer.f = sema_timeout;
    gp->timer.arg = gp;
    gp->timer.seq = w->seq;
    timer_add(&gp->timer, deadline);
  }
  park(unlock_bucket, b, reason, addr);
  gp->wait_kind.store(WaitKind::None, std::memory_order_relaxed);
  if (deadline) timer_del(&gp->timer);
  return w->result;
}

int sema_wake(const void* addr, int n, uint32_t bitset) {
  Bucket* b = bucket_of(addr);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the caller's store [S] before [L]
  if (b->nwait.load(std::memory_order_seq_cst) == 0) return 0;
  GQueue q;
  int woken = 0;
  b->lock.lock();
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
  b->lock.unlock();
  ready_all(q);
  return woken;
}

int sema_requeue(const void* from, const void* to, int nwake, int nrequeue, bool check,
                 uint32_t val) {
  Bucket* b1 = bucket_of(from);
  Bucket* b2 = bucket_of(to);
  // Like the kernel: announce possible waiters on `to` before moving any,
  // so that a concurrent wake of `to` takes the lock and sees them.
  b2->nwait.fetch_add(1, std::memory_order_seq_cst);
  if (b1 == b2) {
    b1->lock.lock();
  } else if (b1 < b2) {
    b1->lock.lock();
    b2->lock.lock();
  } else {
    b2->lock.lock();
    b1->lock.lock();
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
      b2->nwait.fetch_add(1, std::memory_order_relaxed);
      enqueue(b2, w);
      nrequeue--;
      done++;
      w = next;
    }
  }
  if (b1 != b2) b2->lock.unlock();
  b1->lock.unlock();
  b2->nwait.fetch_sub(1, std::memory_order_relaxed);
  ready_all(q);
  return done;
}

bool sema_interrupt(G* gp) {
  SemaWaiter* w = &gp->sw;
  for (;;) {
    const void* addr = __atomic_load_n(&w->addr, __ATOMIC_ACQUIRE);
    if (!addr) return false;
    Bucket* b = bucket_of(addr);
    b->lock.lock();
    if (w->addr != addr) {
      b->lock.unlock();
      continue;
    }
    if (!w->queued.load(std::memory_order_relaxed) || w->gp != gp) {
      b->lock.unlock();
      return false;
    }
    dequeue(b, w);
    GQueue q;
    release(w, EINTR, &q);
    b->lock.unlock();
    ready_all(q);
    return true;
  }
}

int sema_nwaiters(const void* addr) {
  Bucket* b = bucket_of(addr);
  MutexGuard g(b->lock);
  int n = 0;
  for (SemaWaiter* w = *find_head(b, addr); w; w = w->next) n++;
  return n;
}

}  // namespace goshim
