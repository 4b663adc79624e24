// The generic part of the netpoller: poll descriptors' waiter queues,
// waits on one fd, and the dispatch of epoll events (Go's netpoll.go; the
// epoll backend is netpoll_epoll.cpp).
//
// Go keeps one waiting G per side of a pollDesc (rg/wg) because its net.FD
// serializes readers. C programs do not: several threads may block in
// accept() on one listening socket, or in poll() on fds others read. So
// each side has a FIFO of PollWaiter records, and an event wakes every
// waiter of its side; each retries its call and re-parks on EAGAIN.
// Records of one wait may sit on many descriptors (poll): the G's wake
// token (gwait.hpp) makes sure only the first source readies it.
//
//   waiter                                  netpoll (any M)
//   ------                                  ---------------
//   snap = rev                     [L1]
//   attempt -> EAGAIN
//   lock; rev == snap ? enqueue    [L2]     lock; rev++ [S]; take queue; unlock
//   unlock; park                            claim each G
//
// An event that lands between the attempt and the enqueue moved rev, so
// the waiter retries instead of parking; one that lands after the enqueue
// finds the record. Edge-triggered epoll never repeats an edge, so this is
// the only thing that keeps a wake-up from being lost.
#include "core/netpoll.hpp"

#include <errno.h>
#include <sys/epoll.h>

#include "arch/arch.hpp"
#include "core/contract.hpp"
#include "core/fdtable.hpp"
#include "core/rawlog.hpp"
#include "core/rtlock.hpp"
#include "core/sched.hpp"
#include "core/timer.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

__thread int fdl_busy __attribute__((tls_model("initial-exec"))) = 0;

PollDesc* pd_at(uint32_t idx);  // fdtable.cpp

namespace {

// Locks held: pd->lock (the only writers); read lock-free by writers
// looking for a handoff target.
inline void nhandoff_add(PollDesc* pd, int32_t d) {
  GOSHIM_LOCK_HELD(&pd->lock, "pd->lock");
  pd->nhandoff.store(pd->nhandoff.load(std::memory_order_relaxed) + d, std::memory_order_release);
}

PollWaiter** head_of(PollDesc* pd, uint8_t mode) {
  return mode == kModeRead ? &pd->rq_head : &pd->wq_head;
}
PollWaiter** tail_of(PollDesc* pd, uint8_t mode) {
  return mode == kModeRead ? &pd->rq_tail : &pd->wq_tail;
}

// Locks held: pd->lock. Takes every waiter of one side, claiming each for
// Ready; claimed parked Gs go to q.
void wake_side_locked(PollDesc* pd, uint8_t mode, GQueue* q) {
  GOSHIM_LOCK_HELD(&pd->lock, "pd->lock");
  PollWaiter** hp = head_of(pd, mode);
  PollWaiter* w = *hp;
  *hp = nullptr;
  *tail_of(pd, mode) = nullptr;
  while (w) {
    PollWaiter* next = w->next;
    G* gp = w->gp;
    uint64_t seq = w->seq;
    if (w->buf) nhandoff_add(pd, -1);
    w->next = w->prev = nullptr;
    w->linked.store(0, std::memory_order_release);  // last touch: the owner may reuse w
    gwait_claim(gp, seq, WakeReason::Ready, q);
    w = next;
  }
}

void ready_all(GQueue& q) {
  if (q.empty()) return;
  if (q.size == 1)
    ready(q.pop(), true);
  else
    ready_list(q);
}

}  // namespace

void PdLock::lock_slow() {
  int spins = 0;
  for (;;) {
    while (v_.load(std::memory_order_relaxed)) {
      if (++spins < 256)
        arch::cpu_relax();
      else
        rt_spin_yield();  // the holder's M may be descheduled
    }
    if (!v_.exchange(1, std::memory_order_acquire)) return;
  }
}

// ---- registration and queues -------------------------------------------------------

long pd_register_locked(PollDesc* pd) {
  if (pd->registered) return 0;
  if (pd->unpollable) return -EPERM;
  int fd = pd->fd.load(std::memory_order_relaxed);
  if (fd < 0) return -EBADF;
  long r = netpoll_register(fd, pd_tag(pd));
  if (r == -EEXIST) r = 0;  // registered by an earlier life of the number
  if (r == 0) {
    pd->registered = true;
  } else if (r == -EPERM) {
    pd->unpollable = true;
  }
  return r;
}

void pd_enqueue_locked(PollDesc* pd, PollWaiter* w) {
  PollWaiter** hp = head_of(pd, w->mode);
  PollWaiter** tp = tail_of(pd, w->mode);
  w->next = nullptr;
  w->prev = *tp;
  if (*tp)
    (*tp)->next = w;
  else
    *hp = w;
  *tp = w;
  w->pd = pd;
  if (w->buf) nhandoff_add(pd, 1);
  w->linked.store(1, std::memory_order_relaxed);
}

void pd_dequeue_locked(PollDesc* pd, PollWaiter* w) {
  PollWaiter** hp = head_of(pd, w->mode);
  PollWaiter** tp = tail_of(pd, w->mode);
  if (w->prev)
    w->prev->next = w->next;
  else
    *hp = w->next;
  if (w->next)
    w->next->prev = w->prev;
  else
    *tp = w->prev;
  w->next = w->prev = nullptr;
  if (w->buf) nhandoff_add(pd, -1);
  w->linked.store(0, std::memory_order_release);
}

void pd_unlink(PollWaiter* w) {
  if (!w->linked.load(std::memory_order_acquire)) return;
  PollDesc* pd = w->pd;
  PdGuard g(pd->lock);
  if (w->linked.load(std::memory_order_relaxed)) pd_dequeue_locked(pd, w);
}

void pd_wake_all(PollDesc* pd) {
  GQueue q;
  {
    PdGuard g(pd->lock);
    wake_side_locked(pd, kModeRead, &q);
    wake_side_locked(pd, kModeWrite, &q);
  }
  ready_all(q);
}

G* pd_claim_handoff_reader(PollDesc* pd, FileRec* expect, uint32_t expect_gen, size_t n,
                           PollWaiter** out) {
  PdGuard g(pd->lock);
  if (pd->file != expect || pd->closing ||
      expect->gen.load(std::memory_order_relaxed) != expect_gen)
    return nullptr;
  for (PollWaiter* w = pd->rq_head; w; w = w->next) {
    if (!w->buf || w->len < n) continue;
    GQueue q;
    if (!gwait_claim(w->gp, w->seq, WakeReason::Handoff, &q, /*parked_only=*/true)) continue;
    pd_dequeue_locked(pd, w);
    *out = w;
    return q.pop();
  }
  return nullptr;
}

// ---- events ---------------------------------------------------------------------------------

// Called by the backend for every fd event (netpoll_epoll.cpp). On an M
// about to run the Gs in q (or inject them); no locks held.
void netpoll_ready_event(void* data, uint32_t events, GQueue& q) {
  uint64_t tag = (uint64_t)(uintptr_t)data;
  PollDesc* pd = pd_at((uint32_t)tag);
  if (!pd) return;
  uint32_t seq = (uint32_t)(tag >> 32);
  if (pd->seq.load(std::memory_order_acquire) != seq) return;  // a dead generation
  bool rd = events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLPRI);
  bool wr = events & (EPOLLOUT | EPOLLHUP | EPOLLERR);
  PdGuard g(pd->lock);
  if (pd->seq.load(std::memory_order_relaxed) != seq) return;
  if (rd) {
    // [S] pairs with the waiter's [L2]; only written under the lock.
    pd->rev.store(pd->rev.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    FileRec* f = pd->file;
    if (f && (f->flags.load(std::memory_order_relaxed) & kFileChan)) file_chan_bump(f);
    wake_side_locked(pd, kModeRead, &q);
  }
  if (wr) {
    pd->wev.store(pd->wev.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    wake_side_locked(pd, kModeWrite, &q);
  }
}

void netpoll_generic_init() {
  register_wait_interrupter(WaitKind::Netpoll, gwait_interrupt);
  register_wait_interrupter(WaitKind::Sleep, gwait_interrupt);
  fd_install_atfork();
}

}  // namespace goshim
