// The waiting layer of the synchronization primitives (see syncwait.hpp).
#include "core/syncwait.hpp"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>

#include "core/config.hpp"
#include "core/proc.hpp"
#include "core/sched.hpp"
#include "core/sema.hpp"
#include "core/signal.hpp"
#include "syscalls/blocking.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

std::atomic<int> ncpu{0};

int cpus() {
  int n = ncpu.load(std::memory_order_relaxed);
  if (n) return n;
  n = affinity_cpus();
  ncpu.store(n, std::memory_order_relaxed);
  return n;
}

// The kernel futex on the word itself (shared: another process may wake).
int kernel_wait(const void* addr, uint32_t val, const SyncDeadline& dl, uint32_t bitset) {
  int op = FUTEX_WAIT_BITSET;
  if (dl.abs && dl.clk == CLOCK_REALTIME) op |= FUTEX_CLOCK_REALTIME;
  long r = sys::futex(addr, op, val, dl.abs, nullptr, bitset);
  if (r == 0) return 0;
  return (int)-r;  // EAGAIN, ETIMEDOUT, EINTR
}

}  // namespace

int sync_wait(const void* addr, uint32_t val, const SyncDeadline& dl, WaitReason why, bool shared,
              uint32_t bitset, const void** endaddr, bool cancellable) {
  if (dl.abs && dl.abs->tv_sec < 0) return ETIMEDOUT;  // as glibc: before anything else
  if (!shared) {
    int64_t deadline = dl.abs ? deadline_from_abs(dl.clk, dl.abs) : 0;
    for (;;) {
      int r = sema_wait(addr, val, deadline, why, bitset, endaddr, cancellable);
      if (r != EINTR) return r;
      if (cancellable && can_park() && cancel_pending(getg())) return EINTR;
      // A goroutine's wait was interrupted by a signal handler: restart it
      // when the kernel would (no timeout, handler with SA_RESTART). A
      // foreign waiter's kernel wait already followed that rule.
      G* gp = getg();
      bool restart = can_park() && signal_should_restart(gp);
      if (!restart || deadline) return EINTR;
      if (endaddr && *endaddr != addr) return EINTR;  // requeued: the caller must look
    }
  }
  if (endaddr) *endaddr = addr;
  if (can_park()) {
    // A goroutine waits in the kernel like a blocking call: its P goes to
    // other goroutines meanwhile.
    BlockingCall bc(BlockKind::Long, wait_reason_name(why));
    return kernel_wait(addr, val, dl, bitset);
  }
  return kernel_wait(addr, val, dl, bitset);
}

int sync_wake(const void* addr, int n, bool shared, uint32_t bitset) {
  if (!shared) return sema_wake(addr, n, bitset);
  long r = bitset == ~0u ? sys::futex_wake_shared(addr, n)
                         : sys::futex(addr, FUTEX_WAKE_BITSET, (uint32_t)n, nullptr, nullptr,
                                      bitset);
  return r > 0 ? (int)r : 0;
}

bool sync_can_spin(int iter, int32_t owner) {
  if (iter >= 4 || cpus() <= 1) return false;
  G* gp = getg();
  if (!gp || gp->is_g0() || !runtime_up.load(std::memory_order_relaxed)) return true;
  // A goroutine: spinning helps only if the holder may be running on
  // another P, and must not delay work queued on ours.
  if (sched.gomaxprocs <= sched.npidle.load(std::memory_order_relaxed) +
                              sched.nmspinning.load(std::memory_order_relaxed) + 1)
    return false;
  M* mp = gp->m;
  if (!mp || !mp->p) return false;
  if (runqempty(mp->p)) return true;
  // Work waits here: spin only for a holder that is running right now.
  G* holder = is_virtual_tid(owner) ? g_from_vtid(owner) : nullptr;
  return holder && holder != gp &&
         holder->status.load(std::memory_order_relaxed) == GStatus::Running;
}

void sync_yield() {
  if (can_park())
    gosched();
  else
    sys::sched_yield();
}

}  // namespace goshim
