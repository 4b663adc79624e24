// Per-P timer heaps: a 4-ary min-heap ordered by deadline (Go's design),
// O(log n) add and delete, run by the P's owner in the scheduler or stolen
// by an idle M (stealWork's last pass). The earliest deadline of each heap is
// published in when0 so that the M about to sleep in netpoll can compute
// one deadline for everything without taking locks.
//
// A timer's storage belongs to its user (a G embeds one); the heap holds
// pointers. Protocol for users:
//   - timer_add: the timer must not be in a heap.
//   - timer_del: removes it if it has not fired; returns false if it already
//     fired or is firing right now. The callback gets (arg, seq) copied out
//     under the heap lock, so the Timer may be reused as soon as timer_del
//     returns, whatever it returned; the callback must use seq to tell a
//     stale firing from the current one.
#pragma once

#include <stdint.h>

#include <atomic>

#include "core/lock.hpp"

namespace goshim {

struct P;
struct TimerHeap;

struct Timer {
  // Called without any lock, on an M holding a P (usually on g0).
  void (*f)(void* arg, uint64_t seq) = nullptr;
  void* arg = nullptr;
  uint64_t seq = 0;
  int64_t when = 0;  // monotonic ns
  // Heap membership; changed only under the heap's lock.
  std::atomic<TimerHeap*> heap{nullptr};
  int32_t idx = -1;
};

struct TimerHeap {
  struct Ent {
    int64_t when;
    Timer* t;
  };
  Mutex lock{LockRank::Timers};
  Ent* ents = nullptr;  // reserved virtual array, committed on touch
  int32_t len = 0;
  int32_t cap = 0;
  std::atomic<int64_t> when0{0};  // earliest deadline, 0 when empty
};

// Reserves the heap array. Called once per P at init.
void timers_init(TimerHeap* h);

// Adds t to the current P's heap, firing at when (monotonic ns). Any P.
// Wakes the netpoller if this is now the earliest deadline of the P
// (which may start a kernel thread: no runtime lock may be held), unless
// !wake: then it returns whether the caller must call
// wake_netpoller(when) once it holds no lock (sema_wait adds the timer
// under its bucket lock).
bool timer_add(Timer* t, int64_t when, bool wake = true);
// Removes t if still pending. Any P, any thread.
bool timer_del(Timer* t);

// Runs every timer of h that is due at *now (0: read the clock if the heap
// has timers, and store the time read). Returns true if any ran. *next
// receives the earliest remaining deadline (0: none). Any P: the callbacks
// ready Gs onto the calling M's P.
bool timers_run(TimerHeap* h, int64_t* now, int64_t* next);

// Moves every timer of from into to (a P being retired hands its timers to
// its replacement). Any thread. Locks: both heaps, in address order.
void timers_move(TimerHeap* from, TimerHeap* to);

// Earliest deadline in h (0 when empty). Lock-free; may be stale.
inline int64_t timers_wake_time(const TimerHeap* h) {
  return h->when0.load(std::memory_order_acquire);
}

// Number of pending timers in h (racy, for statistics and dumps).
inline int32_t timers_len(const TimerHeap* h) { return h->len; }

}  // namespace goshim
