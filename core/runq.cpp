// Run queues: the per-P lock-free ring with runnext, and the global queue.
//
// The local ring is single-producer (the owner P pushes at tail) and
// multi-consumer (the owner and thieves take from head with a CAS). A thief
// takes half of the ring in one CAS. When the ring is full the owner moves
// half of it, plus the new G, to the global queue in one batch.
#include "core/contract.hpp"
#include "core/gmp.hpp"
#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

bool runqempty(P* pp) {
  // Read head, tail and runnext consistently: if tail changed while we
  // looked at runnext, retry (a G may have moved from runnext to the ring).
  for (;;) {
    uint32_t head = pp->runqhead.load(std::memory_order_acquire);
    uint32_t tail = pp->runqtail.load(std::memory_order_acquire);
    G* next = pp->runnext.load(std::memory_order_acquire);
    if (tail == pp->runqtail.load(std::memory_order_acquire)) return head == tail && !next;
  }
}

bool runq_chain_over(P* pp) {
  // A futile park (park.cpp) ends the chain at once. Otherwise its time
  // is measured from the chain's first hand-off, not from the slice's
  // start: after a G that computed for its whole slice, the chain still
  // gets its kRunnextChainNs (from the slice's start: one hand-off).
  if (pp->park_futile) return true;
  return pp->chain_len > 0 && sys::nanotime() - pp->chain_start >= kRunnextChainNs;
}

uint32_t runqlen(P* pp) {
  uint32_t head = pp->runqhead.load(std::memory_order_acquire);
  uint32_t tail = pp->runqtail.load(std::memory_order_acquire);
  return tail - head + (pp->runnext.load(std::memory_order_relaxed) ? 1 : 0);
}

// Moves half of the full ring plus gp to the global queue. Owner P only.
static bool runqputslow(P* pp, G* gp, uint32_t head, uint32_t tail) {
  G* batch[kRunqSize / 2 + 1];
  uint32_t n = (tail - head) / 2;
  GOSHIM_CHECK(n == kRunqSize / 2, "runqputslow: queue is not full");
  for (uint32_t i = 0; i < n; i++)
    batch[i] = pp->runq[(head + i) % kRunqSize].load(std::memory_order_relaxed);
  // cas-release: commits the consume (pairs with thieves' load-acquire of head)
  if (!pp->runqhead.compare_exchange_strong(head, head + n, std::memory_order_release,
                                            std::memory_order_relaxed))
    return false;
  batch[n] = gp;
  GQueue q;
  for (uint32_t i = 0; i <= n; i++) q.push_back(batch[i]);
  sched.lock.lock();
  globrunqputbatch(q);
  sched.lock.unlock();
  return true;
}

// runqput without a new stamp: gp keeps its place in time (a batch taken
// from the global queue). Owner P only.
static void runqput_keep(P* pp, G* gp, bool next) {
  if (next) {
    G* old = pp->runnext.exchange(gp, std::memory_order_acq_rel);
    if (!old) return;
    gp = old;  // kick the old runnext to the tail of the ring
  }
  for (;;) {
    uint32_t head = pp->runqhead.load(std::memory_order_acquire);  // synchronizes with consumers
    uint32_t tail = pp->runqtail.load(std::memory_order_relaxed);  // only we write it
    if (tail - head < kRunqSize) {
      pp->runq[tail % kRunqSize].store(gp, std::memory_order_relaxed);
      pp->runqtail.store(tail + 1, std::memory_order_release);  // publishes the slot to consumers
      return;
    }
    if (runqputslow(pp, gp, head, tail)) return;
    // a thief consumed meanwhile: the ring has room now
  }
}

// The stamp of a G made runnable now (G::readyat): on an M, the tick its
// CPU time accounting read last (core/cputime.hpp), that is when the
// readier's run began, or its scheduler's last switch: no second counter
// read on a switch (a read costs ~10 ns on this machine's CPUs). Earlier
// than now by at most the readier's run so far: the order between a ring
// and the global queue stays approximate, as across CPUs.
static inline uint64_t ready_stamp() {
  G* cur = getg();
  M* mp = cur ? cur->m : nullptr;
  uint64_t t = mp ? mp->cw.last : 0;
  return t ? t : runq_stamp();
}

void runqput(P* pp, G* gp, bool next) {
  gp->readyat = ready_stamp();
  runqput_keep(pp, gp, next);
}

// The head of pp's ring (not runnext), or nullptr. Owner P only.
G* runq_ring_get(P* pp) {
  for (;;) {
    uint32_t head = pp->runqhead.load(std::memory_order_acquire);  // pairs with other consumers
    uint32_t tail = pp->runqtail.load(std::memory_order_relaxed);
    if (tail == head) return nullptr;
    G* gp = pp->runq[head % kRunqSize].load(std::memory_order_relaxed);
    if (pp->runqhead.compare_exchange_weak(head, head + 1, std::memory_order_release,
                                           std::memory_order_relaxed))
      return gp;
  }
}

G* runqget(P* pp, bool* inherit_time) {
  G* next = pp->runnext.load(std::memory_order_relaxed);
  // If there is a runnext, it is the next G to run. Only the owner sets
  // runnext, but thieves may clear it: use a CAS.
  if (next && pp->runnext.compare_exchange_strong(next, nullptr, std::memory_order_acquire)) {
    *inherit_time = true;
    return next;
  }
  *inherit_time = false;
  return runq_ring_get(pp);
}

// Grabs half of pp's Gs into batch[batch_head ...] (a ring of kRunqSize).
// Returns how many. Any P.
static uint32_t runqgrab(P* pp, std::atomic<G*>* batch, uint32_t batch_head,
                         bool steal_runnext) {
  for (;;) {
    uint32_t head = pp->runqhead.load(std::memory_order_acquire);  // pairs with consumers
    uint32_t tail = pp->runqtail.load(std::memory_order_acquire);  // pairs with the producer
    uint32_t n = tail - head;
    n = n - n / 2;
    if (n == 0) {
      if (steal_runnext) {
        G* next = pp->runnext.load(std::memory_order_acquire);
        if (next) {
          if (pp->status.load(std::memory_order_relaxed) == PStatus::Running) {
            // pp's owner is probably about to run next itself (it was
            // just readied by the G running there); stealing it now would
            // bounce it between Ms. Back off briefly, as Go does (3 µs).
            struct timespec ts = {0, 3000};
            sys::nanosleep(&ts, nullptr);
          }
          if (!pp->runnext.compare_exchange_strong(next, nullptr, std::memory_order_acq_rel))
            continue;
          batch[batch_head % kRunqSize].store(next, std::memory_order_relaxed);
          return 1;
        }
      }
      return 0;
    }
    if (n > kRunqSize / 2) continue;  // read inconsistent head and tail
    for (uint32_t i = 0; i < n; i++) {
      G* gp = pp->runq[(head + i) % kRunqSize].load(std::memory_order_relaxed);
      batch[(batch_head + i) % kRunqSize].store(gp, std::memory_order_relaxed);
    }
    // cas-release: commits the consume
    if (pp->runqhead.compare_exchange_weak(head, head + n, std::memory_order_release,
                                           std::memory_order_relaxed))
      return n;
  }
}

G* runqsteal(P* pp, P* p2, bool steal_runnext) {
  uint32_t tail = pp->runqtail.load(std::memory_order_relaxed);
  uint32_t n = runqgrab(p2, pp->runq, tail, steal_runnext);
  if (n == 0) return nullptr;
  n--;
  G* gp = pp->runq[(tail + n) % kRunqSize].load(std::memory_order_relaxed);
  if (n == 0) return gp;
  uint32_t head = pp->runqhead.load(std::memory_order_acquire);
  GOSHIM_CHECK(tail - head + n < kRunqSize, "runqsteal: runq overflow");
  pp->runqtail.store(tail + n, std::memory_order_release);  // publishes the stolen Gs
  sched.nsteal.fetch_add(1, std::memory_order_relaxed);
  return gp;
}

// Locks held: sched.lock. After the queue's head changed.
static void globrunq_head_changed() {
  G* h = sched.runq.head;
  sched.runqheadat.store(h ? h->readyat : 0, std::memory_order_relaxed);
}

void globrunqput(G* gp) {
  gp->readyat = ready_stamp();
  sched.lock.lock();
  sched.runq.push_back(gp);
  sched.runqsize.store(sched.runq.size, std::memory_order_relaxed);
  if (sched.runq.size == 1) globrunq_head_changed();
  sched.lock.unlock();
}

// Locks held: sched.lock. The Gs keep their stamps (G::readyat): a caller
// readying new ones stamps them first (ready_list, inject_glist).
void globrunqputbatch(GQueue& q) {
  GOSHIM_LOCK_HELD(&sched.lock, "sched.lock");
  bool was_empty = sched.runq.empty();
  sched.runq.push_back_all(q);
  sched.runqsize.store(sched.runq.size, std::memory_order_relaxed);
  if (was_empty) globrunq_head_changed();
}

// The older of pp's ring head and the global queue's head, if the global
// one is older (FIFO between the two queues by G::readyat); else nullptr
// and the caller takes the ring's head. Owner P only. Without this a P
// whose ring never ran dry (Gs readied by its own network polls, wakes by
// its own Gs) left the global queue's Gs (preempted and yielded ones,
// sysmon's and other Ms' injections, a ring's overflow) to the 1-in-61
// check: with a P polling the network while busy, some echo connections
// at 5,000 waited 1 s (e82219c), and at 16 MariaDB connections preempted
// and yielded Gs waited p90 27-190 ms (bench/RESULTS.md, db16b). Stamps
// of different CPUs are compared: a counter that is not synchronized
// across CPUs makes the order approximate, nothing worse.
static G* globrunq_if_older(P* pp) {
  if (sched.runqsize.load(std::memory_order_relaxed) == 0) return nullptr;
  uint32_t head = pp->runqhead.load(std::memory_order_acquire);
  uint32_t tail = pp->runqtail.load(std::memory_order_relaxed);
  if (head == tail) return nullptr;  // the caller takes the global queue anyway
  G* lh = pp->runq[head % kRunqSize].load(std::memory_order_relaxed);
  // A thief may take lh meanwhile: its stamp is then a hint, nothing more
  // (G descriptors stay mapped).
  uint64_t ls = __atomic_load_n(&lh->readyat, __ATOMIC_RELAXED);
  uint64_t gs = sched.runqheadat.load(std::memory_order_relaxed);
  if (gs == 0 || (int64_t)(ls - gs) <= 0) return nullptr;
  sched.lock.lock();
  G* gp = globrunqget(pp, 1);
  sched.lock.unlock();
  if (gp) sched.nglobolder.fetch_add(1, std::memory_order_relaxed);
  return gp;
}

G* runq_pick(P* pp, bool* inherit_time) {
  *inherit_time = false;
  // Fairness: check the global queue once in a while, so that two Gs
  // respawning each other on one P cannot starve it.
  if (pp->schedtick % 61 == 0 && sched.runqsize.load(std::memory_order_relaxed) > 0) {
    sched.lock.lock();
    G* gp = globrunqget(pp, 1);
    sched.lock.unlock();
    if (gp) return gp;
  }
  // A chain of runnext hand-offs (each G wakes one waiter, then waits:
  // a ping-pong, or a herd of lock waiters waking each other) inherits
  // one time slice and would keep the queued Gs from running for all of
  // it (10 ms); among them may be the one the chain waits for (the
  // holder of an InnoDB latch). After kRunnextChainNs of the slice,
  // queued Gs go first; runnext keeps its place for the next pick. (A
  // bound by count instead starves a chain doing real work behind a G
  // that computes: two hand-offs per 10 ms slice of the latter.)
  if (pp->runnext.load(std::memory_order_relaxed) &&
      (pp->runqhead.load(std::memory_order_relaxed) != pp->runqtail.load(std::memory_order_relaxed) ||
       sched.runqsize.load(std::memory_order_relaxed) > 0) &&
      runq_chain_over(pp)) {
    if (G* gp = globrunq_if_older(pp)) return gp;
    if (G* gp = runq_ring_get(pp)) return gp;
    if (sched.runqsize.load(std::memory_order_relaxed) > 0) {
      sched.lock.lock();
      G* gp = globrunqget(pp, 1);
      sched.lock.unlock();
      if (gp) return gp;
    }
  }
  if (!pp->runnext.load(std::memory_order_relaxed))
    if (G* gp = globrunq_if_older(pp)) return gp;
  if (G* gp = runqget(pp, inherit_time)) return gp;
  if (sched.runqsize.load(std::memory_order_relaxed) > 0) {
    sched.lock.lock();
    G* gp = globrunqget(pp, 0);  // the local queue is empty: room for the batch
    sched.lock.unlock();
    if (gp) return gp;
  }
  return nullptr;
}

G* globrunqget(P* pp, int32_t max) {
  int32_t size = sched.runq.size;
  if (size == 0) return nullptr;
  int32_t n = size / sched.gomaxprocs + 1;
  if (n > size) n = size;
  if (max > 0 && n > max) n = max;
  if (n > (int32_t)kRunqSize / 2) n = kRunqSize / 2;
  G* gp = sched.runq.pop();
  n--;
  for (; n > 0; n--) runqput_keep(pp, sched.runq.pop(), false);
  sched.runqsize.store(sched.runq.size, std::memory_order_relaxed);
  globrunq_head_changed();
  return gp;
}

}  // namespace goshim
