// The network poller: one epoll instance shared by the whole process.
//
// This header is the platform-independent contract the scheduler relies on:
//   netpoll_init       creates the instance and its break eventfd
//   netpoll(delay, q)  collects Gs made runnable by fd events; delay < 0
//                      blocks until an event or netpoll_break, 0 never
//                      blocks, > 0 waits at most delay ns
//   netpoll_break      wakes an M blocked in netpoll (idempotent until the
//                      sleeper wakes)
//   netpoll_any_waiters  whether any G waits on an fd (so polling is useful)
// The epoll backend is netpoll_epoll.cpp. The generic part below (poll
// descriptors, their waiter queues, waits on one or many fds) is
// netpoll.cpp and pollwait.cpp; the fd table that owns the descriptors is
// fdtable.hpp.
//
// Backend contract (what netpoll_epoll.cpp provides to netpoll.cpp):
//   netpoll_register(fd, tag)  edge-triggered EPOLLIN|EPOLLOUT|EPOLLRDHUP|
//                              EPOLLPRI|EPOLLET, reporting tag with events
//   netpoll_unregister(fd)
//   netpoll_ready_event(tag, events, q) is called for each event (weak
//   default: ignore) and appends the Gs to run to q.
#pragma once

#include <signal.h>
#include <stdint.h>

#include "core/gmp.hpp"
#include "core/gwait.hpp"

namespace goshim {

void netpoll_init();
bool netpoll_inited();
void netpoll(int64_t delay_ns, GQueue& q);
void netpoll_break();
bool netpoll_any_waiters();

// Adjusts the count of Gs waiting on fds (used by the fd layer). Any
// thread: the calling M's P counter (owner-only, no RMW), else a global.
void netpoll_adjust_waiters(int32_t delta);
// The same on mp's counter (mp: the calling thread's M; nullptr: the caller's).
void netpoll_adjust_waiters_on(M* mp, int32_t delta);

// In a fork child: a new epoll instance (the parent's is shared with it).
void netpoll_after_fork();

// The epoll fd (for registering descriptors).
int netpoll_epfd();
// The netpoller's own fds (epoll instance, break eventfd) are registered
// with core/ownfd.hpp: the program may take their numbers.

// Backend registration. Return 0 or -errno (EPERM: the file cannot be polled).
long netpoll_register(int fd, uint64_t tag);
long netpoll_unregister(int fd);

// Called by the backend for every fd event (netpoll.cpp): tag is the
// descriptor's pd_tag, q collects the Gs to run. On an M, no locks held.
void netpoll_ready_event(void* tag, uint32_t events, GQueue& q);

// Registers the interrupters of the netpoll and sleep waits (runtime init).
void netpoll_generic_init();

// ---- poll descriptors (netpoll.cpp) ----------------------------------------------

enum : uint8_t { kModeRead = 1, kModeWrite = 2 };

struct FileRec;

// Depth of fd-layer critical sections (descriptor or arena lock held) on
// this thread of control: per goroutine, since TLS is per goroutine. A
// signal handler that interrupts one and calls write() (the self-pipe
// trick) must not re-enter them: while it is non-zero, fd calls take the
// kernel-thread path (real libc, no descriptor lock, no parking).
extern __thread int fdl_busy __attribute__((tls_model("initial-exec")));
struct FdlScope {
  FdlScope() { fdl_busy++; }
  ~FdlScope() { fdl_busy--; }
  FdlScope(const FdlScope&) = delete;
  FdlScope& operator=(const FdlScope&) = delete;
};

// The goroutine the fd layer may park for this call, or nullptr: off a
// goroutine (before init, foreign kernel threads, g0, a handler that
// interrupted a blocking call, a program signal handler), inside a runtime
// critical section (M::locks) or an fd-layer one (fdl_busy). Same rule as
// shim::user_g plus those two; any thread.
inline G* fd_user_g() {
  G* g = tls_g;
  if (__builtin_expect(g == nullptr || !g->serves_calls(), 0)) return nullptr;
  if (__builtin_expect(fdl_busy != 0, 0)) return nullptr;
  M* m = g->m;
  if (__builtin_expect(m != nullptr && m->locks.load(std::memory_order_relaxed) != 0, 0))
    return nullptr;
  return g;
}

// A descriptor's lock: a spin lock (unlock is a plain store, one atomic
// read-modify-write less than Mutex on the I/O fast path). Held for a few
// dozen instructions, or across one epoll_ctl when a descriptor is first
// registered or closed; contenders spin, then yield the CPU.
class PdLock {
 public:
  constexpr PdLock() = default;
  void lock() {
    if (__builtin_expect(v_.exchange(1, std::memory_order_acquire), 0)) lock_slow();
    lock_rank_acquire(LockRank::PollDesc, this, false);
  }
  void unlock() {
    lock_rank_release(LockRank::PollDesc, this);
    v_.store(0, std::memory_order_release);
  }

 private:
  void lock_slow();
  std::atomic<uint32_t> v_{0};
};

class PdGuard {
 public:
  explicit PdGuard(PdLock& l) : l_(l) { l_.lock(); }
  ~PdGuard() { l_.unlock(); }
  PdGuard(const PdGuard&) = delete;
  PdGuard& operator=(const PdGuard&) = delete;

 private:
  FdlScope busy_;  // constructed before the lock is taken, destroyed after it is released
  PdLock& l_;
};

// goshim's record of one open fd number: Go's pollDesc plus the fd-table
// entry (fdtable.hpp says who owns it and how it is recycled).
struct PollDesc {
  PdLock lock;                      // LockRank::PollDesc
  std::atomic<int> fd{-1};          // the number syscalls use (a hidden dup once orphaned)
  uint32_t idx = 0;                 // index in the descriptor arena (half of the epoll tag)
  std::atomic<uint32_t> seq{0};     // generation (other half); changes on every reuse
  std::atomic<int32_t> refs{0};     // table slot + operations in flight; 0 = free
  FileRec* file = nullptr;          // its open file description (set while live)
  bool registered = false;          // in the epoll set (lock)
  bool unpollable = false;          // epoll refused it (lock)
  bool closing = false;             // detached from its number by close (lock)
  // Readiness events seen so far, per side. A waiter reads the counter
  // before its attempt and parks only if it has not moved since (under the
  // lock), so an edge between the attempt and the park is never lost.
  std::atomic<uint32_t> rev{0};
  std::atomic<uint32_t> wev{0};
  // Waiter queues (lock): every waiter of a side is woken by its event.
  PollWaiter* rq_head = nullptr;
  PollWaiter* rq_tail = nullptr;
  PollWaiter* wq_head = nullptr;
  PollWaiter* wq_tail = nullptr;
  std::atomic<int32_t> nhandoff{0};  // parked readers that take a direct handoff
  std::atomic<int32_t> inuse{0};     // holders in a system call on the program's number
  std::atomic<int32_t> tent{0};      // references being taken, not yet validated (fdtable.cpp)
  PollDesc* freelink = nullptr;      // arena free list
};

// The epoll tag of pd's current generation.
inline uint64_t pd_tag(const PollDesc* pd) {
  return (uint64_t)pd->seq.load(std::memory_order_relaxed) << 32 | pd->idx;
}

// Event counter of one side, read before an attempt.
inline uint32_t pd_events(const PollDesc* pd, uint8_t mode) {
  return (mode == kModeRead ? pd->rev : pd->wev).load(std::memory_order_acquire);
}

// Locks held: pd->lock. Registers pd's fd with epoll if needed. Returns 0,
// or -errno (-EPERM marks pd unpollable).
long pd_register_locked(PollDesc* pd);

// Locks held: pd->lock. Queue management.
void pd_enqueue_locked(PollDesc* pd, PollWaiter* w);
void pd_dequeue_locked(PollDesc* pd, PollWaiter* w);

// Any thread. Removes w from its descriptor's queue if a waker has not.
void pd_unlink(PollWaiter* w);

// On user G. Parks the current G until pd's `mode` side reports an event
// after snap, the deadline (monotonic ns, 0: none) passes, a signal
// interrupts it, or (hbuf != nullptr: a plain read of a same-process pipe)
// a writer copies up to hlen bytes into hbuf (*got = bytes, reason
// Handoff). Returns Ready (retry), Timeout, Intr or Handoff; returns None
// with *err = -errno if pd cannot be waited on (-EPERM: not pollable,
// -EBADF: closed).
//
// handled0: G::nhandled when the operation started. A program signal
// handler that ran on the G since (a signal that came while it was not yet
// parked) ends the wait with Handled instead of parking: for the program
// the whole operation is one system call that the signal interrupted.
// cancel_point: the operation is a cancellation point (gwait_arm).
WakeReason pd_wait(PollDesc* pd, uint8_t mode, uint32_t snap, int64_t deadline, WaitReason why,
                   void* hbuf, size_t hlen, size_t* got, long* err, uint32_t handled0,
                   bool cancel_point);

// Any thread. Wakes every waiter of pd (both sides) so that it retries:
// shutdown, and anything else that changes an fd's state without an edge.
void pd_wake_all(PollDesc* pd);

// Any P. Claims a parked reader of pd that takes a direct handoff of n
// bytes (a plain read with room for them). Returns its G, claimed and
// unlinked but not readied, with w set to its record: the caller copies
// the data into w->buf, sets w->got, then readies the G. nullptr if none.
G* pd_claim_handoff_reader(PollDesc* pd, FileRec* expect, uint32_t expect_gen, size_t n,
                           PollWaiter** w);

// ---- waits on many fds (pollwait.cpp) ----------------------------------------------

struct FdInterest {
  int fd;
  uint8_t modes;  // kModeRead | kModeWrite
};

// On user G. Waits until check(ctx) (a nonblocking readiness test: the
// real poll/select/epoll_wait with a zero timeout) returns non-zero, the
// deadline passes (monotonic ns, 0: none, -1: do not wait) or a signal
// interrupts the wait. Returns check's value, 0 on timeout (after a last
// check), or -EINTR; then *restart (if not null) receives whether the call
// restarts under SA_RESTART (signal_restart_since over this wait: poll,
// select and epoll_wait never do, splice and tee may). sigmask (ppoll,
// pselect, epoll_pwait): the G's signal mask from the first check that
// finds nothing ready to the end, as the kernel's; a handler that runs as
// it is set ends the call with EINTR (deadline -1 too: a zero timeout).
long netpoll_wait_fds(const FdInterest* v, int n, int64_t deadline, long (*check)(void* ctx),
                      void* ctx, WaitReason why, const sigset_t* sigmask = nullptr,
                      bool* restart = nullptr);

}  // namespace goshim
