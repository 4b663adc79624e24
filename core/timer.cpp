// Per-P 4-ary timer heaps (see timer.hpp).
#include "core/timer.hpp"

#include <sys/mman.h>

#include "core/contract.hpp"
#include "core/gmp.hpp"
#include "core/netpoll.hpp"
#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

// 4M pending timers per P; only touched pages cost memory.
constexpr int32_t kHeapCap = 4 << 20;

void set_ent(TimerHeap* h, int32_t i, TimerHeap::Ent e) {
  h->ents[i] = e;
  e.t->idx = i;
}

void sift_up(TimerHeap* h, int32_t i) {
  TimerHeap::Ent e = h->ents[i];
  while (i > 0) {
    int32_t parent = (i - 1) / 4;
    if (e.when >= h->ents[parent].when) break;
    set_ent(h, i, h->ents[parent]);
    i = parent;
  }
  set_ent(h, i, e);
}

void sift_down(TimerHeap* h, int32_t i) {
  TimerHeap::Ent e = h->ents[i];
  int32_t n = h->len;
  for (;;) {
    int32_t c = i * 4 + 1;
    if (c >= n) break;
    int32_t best = c;
    int32_t end = c + 4 < n ? c + 4 : n;
    for (int32_t j = c + 1; j < end; j++)
      if (h->ents[j].when < h->ents[best].when) best = j;
    if (h->ents[best].when >= e.when) break;
    set_ent(h, i, h->ents[best]);
    i = best;
  }
  set_ent(h, i, e);
}

// Removes entry i. Locks held: h->lock.
void remove_at(TimerHeap* h, int32_t i) {
  GOSHIM_LOCK_HELD(&h->lock, "the heap's lock");
  Timer* t = h->ents[i].t;
  int32_t last = --h->len;
  if (i != last) {
    h->ents[i] = h->ents[last];
    h->ents[i].t->idx = i;
    if (i > 0 && h->ents[i].when < h->ents[(i - 1) / 4].when)
      sift_up(h, i);
    else
      sift_down(h, i);
  }
  t->idx = -1;
  t->heap.store(nullptr, std::memory_order_release);
}

void publish(TimerHeap* h) {
  h->when0.store(h->len ? h->ents[0].when : 0, std::memory_order_release);
}

}  // namespace

void timers_init(TimerHeap* h) {
  void* p = sys::mmap(nullptr, (size_t)kHeapCap * sizeof(TimerHeap::Ent), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fatal("cannot reserve the timer heap");
  // kHeapCap entries per P, nearly all never touched: out of core dumps.
  sys::madvise(p, (size_t)kHeapCap * sizeof(TimerHeap::Ent), MADV_DONTDUMP);
  h->ents = (TimerHeap::Ent*)p;
  h->cap = kHeapCap;
}

bool timer_add(Timer* t, int64_t when, bool wake) {
  M* mp = acquirem();
  P* pp = mp->p;
  GOSHIM_CHECK(pp != nullptr, "timer_add without a P");
  TimerHeap* h = &pp->timers;
  h->lock.lock();
  GOSHIM_CHECK(t->heap.load(std::memory_order_relaxed) == nullptr, "timer_add: timer in a heap");
  if (h->len >= h->cap) fatal("too many pending timers on one P");
  t->when = when;
  t->heap.store(h, std::memory_order_relaxed);
  int32_t i = h->len++;
  set_ent(h, i, {when, t});
  sift_up(h, i);
  bool earliest = h->ents[0].t == t;
  publish(h);
  h->lock.unlock();
  releasem(mp);
  if (earliest && wake) wake_netpoller(when);
  return earliest && !wake;
}

bool timer_del(Timer* t) {
  for (;;) {
    TimerHeap* h = t->heap.load(std::memory_order_acquire);
    if (!h) return false;
    h->lock.lock();
    if (t->heap.load(std::memory_order_relaxed) != h) {
      h->lock.unlock();
      continue;  // moved or fired meanwhile
    }
    remove_at(h, t->idx);
    publish(h);
    h->lock.unlock();
    return true;
  }
}

void timers_move(TimerHeap* from, TimerHeap* to) {
  if (from == to) return;
  TimerHeap* first = from < to ? from : to;
  TimerHeap* second = from < to ? to : from;
  first->lock.lock();
  second->lock.lock();
  while (from->len > 0) {
    Timer* t = from->ents[from->len - 1].t;
    int64_t when = from->ents[from->len - 1].when;
    remove_at(from, from->len - 1);
    if (to->len >= to->cap) fatal("too many pending timers on one P");
    t->heap.store(to, std::memory_order_relaxed);
    int32_t i = to->len++;
    set_ent(to, i, {when, t});
    sift_up(to, i);
  }
  publish(from);
  publish(to);
  second->lock.unlock();
  first->lock.unlock();
}

bool timers_run(TimerHeap* h, int64_t* nowp, int64_t* next) {
  bool ran = false;
  int64_t w = h->when0.load(std::memory_order_acquire);
  if (w == 0) {
    *next = 0;
    return false;
  }
  if (*nowp == 0) *nowp = sys::nanotime();
  int64_t now = *nowp;
  if (w > now) {
    *next = w;
    return false;
  }
  h->lock.lock();
  while (h->len > 0 && h->ents[0].when <= now) {
    Timer* t = h->ents[0].t;
    void (*f)(void*, uint64_t) = t->f;
    void* arg = t->arg;
    uint64_t seq = t->seq;
    remove_at(h, 0);
    publish(h);
    h->lock.unlock();
    f(arg, seq);  // t may be reused from here on
    ran = true;
    h->lock.lock();
  }
  *next = h->len ? h->ents[0].when : 0;
  h->lock.unlock();
  return ran;
}

}  // namespace goshim
