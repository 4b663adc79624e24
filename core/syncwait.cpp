// The waiting layer of the synchronization primitives (see syncwait.hpp).
#include "core/syncwait.hpp"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>

#include "arch/arch.hpp"
#include "core/cancelproto.hpp"
#include "core/config.hpp"
#include "core/proc.hpp"
#include "core/sched.hpp"
#include "core/pi.hpp"
#include "core/sema.hpp"
#include "core/sharedwatch.hpp"
#include "core/signal.hpp"
#include "core/tcb.hpp"
#include "core/tls.hpp"
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
// ch: the calling goroutine's cancelhandling when the wait may be ended by
// its cancellation (goshim_cancellable_syscall), else null.
int kernel_wait(const void* addr, uint32_t val, const SyncDeadline& dl, uint32_t bitset,
                const int* ch = nullptr) {
  int op = FUTEX_WAIT_BITSET;
  if (dl.abs && dl.clk == CLOCK_REALTIME) op |= FUTEX_CLOCK_REALTIME;
  long r = ch ? goshim_cancellable_syscall(ch, SYS_futex, (long)addr, op, val, (long)dl.abs, 0,
                                           (long)bitset)
              : sys::futex(addr, op, val, dl.abs, nullptr, bitset);
  if (r == 0) return 0;
  return (int)-r;  // EAGAIN, ETIMEDOUT, EINTR
}

// A kernel thread's cancellable wait on a process-shared word (every
// thread in 1:1 mode): the kernel futex in time slices, ended by a pending
// cancellation; pthread_cancel's SIGCANCEL (foreign_cancel_kick) ends a
// slice at once. A signal handler ends the wait as it would end a plain
// futex wait (timed, or without SA_RESTART); otherwise it goes on.
constexpr int64_t kCancelSliceNs = 500 * 1000 * 1000;

int kernel_wait_cancellable(const void* addr, uint32_t val, const SyncDeadline& dl,
                            uint32_t bitset) {
  ForeignCancelWait mark;
  for (;;) {
    if (tcb::self_cancel_pending()) return EINTR;  // the caller acts on it
    struct timespec ts;
    bool slice = true;
    int op = FUTEX_WAIT_BITSET;
    if (dl.abs) {
      int64_t now = dl.clk == CLOCK_REALTIME ? sys::walltime() : sys::nanotime();
      int64_t end = (int64_t)dl.abs->tv_sec * 1000000000 + dl.abs->tv_nsec;
      if (end - now <= kCancelSliceNs) slice = false;
      else end = now + kCancelSliceNs;
      ts.tv_sec = end / 1000000000;
      ts.tv_nsec = end % 1000000000;
      if (dl.clk == CLOCK_REALTIME) op |= FUTEX_CLOCK_REALTIME;
    } else {
      int64_t end = sys::nanotime() + kCancelSliceNs;
      ts.tv_sec = end / 1000000000;
      ts.tv_nsec = end % 1000000000;
    }
    long r = sys::futex(addr, op, val, &ts, nullptr, bitset);
    if (r == 0) return 0;
    if (r == -ETIMEDOUT) {
      if (!slice) return ETIMEDOUT;
      continue;
    }
    if (r == -EINTR) {
      if (tcb::self_cancel_pending()) return EINTR;
      if (!dl.abs && signal_handlers_all_restart()) continue;
    }
    return (int)-r;  // EAGAIN, EINTR
  }
}

// A kernel thread's wait for a process-shared PI mutex in asynchronous
// cancellation mode: glibc's SIGCANCEL handler would unwind it inside the
// futex call, and its PiWaiter (core/pi.hpp) lives in a frame that goes.
// As wait_foreign (core/sema.cpp) for private words: SIGCANCEL stays
// blocked during the wait, which pthread_cancel's kick wakes (a shared
// wake of the word, foreign_cancel_publish_shared) and which sleeps in
// slices of kPiAsyncSliceNs anyway; it ends when a cancellation was
// requested: the record is dropped, and unblocking then lets the handler
// act. 0 then (the caller looks again).
constexpr int64_t kPiAsyncSliceNs = 20 * 1000 * 1000;

int kernel_wait_pi_async(const void* addr, uint32_t val, const SyncDeadline& dl,
                         uint32_t bitset) {
  uint64_t block = 1ull << (32 - 1), old = 0;  // glibc's SIGCANCEL
  sys::rt_sigprocmask(SIG_BLOCK, &block, &old, 8);
  int r = 0;
  {
    ForeignCancelWait mark;  // ends before SIGCANCEL opens
    foreign_cancel_publish_shared(addr);
    for (;;) {
      if (tcb::self_cancel_requested()) {
        r = 0;
        break;
      }
      struct timespec ts;
      bool last = false;
      int op = FUTEX_WAIT_BITSET;
      int64_t now = dl.abs && dl.clk == CLOCK_REALTIME ? sys::walltime() : sys::nanotime();
      int64_t end = now + kPiAsyncSliceNs;
      if (dl.abs) {
        int64_t u = (int64_t)dl.abs->tv_sec * 1000000000 + dl.abs->tv_nsec;
        if (u <= end) {
          end = u;
          last = true;
        }
        if (dl.clk == CLOCK_REALTIME) op |= FUTEX_CLOCK_REALTIME;
      }
      ts.tv_sec = end / 1000000000;
      ts.tv_nsec = end % 1000000000;
      long k = sys::futex(addr, op, val, &ts, nullptr, bitset);
      if (k == -ETIMEDOUT) {
        if (last) {
          r = ETIMEDOUT;
          break;
        }
        continue;
      }
      r = k == 0 ? 0 : (int)-k;  // woken; EAGAIN (the word changed); EINTR (a handler ran)
      break;
    }
    foreign_cancel_publish_shared(nullptr);
  }
  if (!(old & block) && tcb::self_cancel_requested()) pi_wait_drop_self();
  if (!(old & block)) sys::rt_sigprocmask(SIG_SETMASK, &old, nullptr, 8);
  return r;
}

// A goroutine's wait that a signal interrupted: with asynchronous
// cancellation on and a cancellation pending, the goroutine is canceled
// here, as glibc's handler would cancel a thread in its futex wait (the
// object is left as glibc leaves it, e.g. a mutex word marked contended).
void act_on_async_cancel(G* gp) {
  if (!cancel_async_pending(gp)) return;
  if (gp->pi_wait) pi_wait_drop_self();  // its record lives in a frame about to go
  cancel_point();
}

}  // namespace

int sync_wait(const void* addr, uint32_t val, const SyncDeadline& dl, WaitReason why, bool shared,
              uint32_t bitset, const void** endaddr, bool cancellable, const SemaLockWait* lock) {
  if (dl.abs && dl.abs->tv_sec < 0) return ETIMEDOUT;  // as glibc: before anything else
  if (!shared) {
    int64_t deadline = dl.abs ? deadline_from_abs(dl.clk, dl.abs) : 0;
    // With asynchronous cancellation on, every wait of a goroutine ends at
    // a cancellation, which is acted on below (only gp changes its type).
    bool ends = cancellable || (can_park() && cancel_async_type(getg()));
    uint32_t h0 = can_park() ? getg()->nhandled : 0;
    for (;;) {
      int r = sema_wait(addr, val, deadline, why, bitset, endaddr, ends, nullptr, nullptr, lock);
      if (r != EINTR) return r;
      if (can_park()) act_on_async_cancel(getg());
      if (cancellable && can_park() && cancel_pending(getg())) return EINTR;
      // Woken for a signal another G took, no handler run on this one
      // (signal_interrupt_lost): it waits on, as natively (sem_wait never
      // fails with EINTR without a handler).
      if (can_park() && !(endaddr && *endaddr != addr) && signal_interrupt_lost(getg(), h0)) continue;
      // A goroutine's wait was interrupted by a signal handler: restart it
      // when the kernel would (no timeout, handler with SA_RESTART). A
      // foreign waiter's kernel wait already followed that rule.
      G* gp = getg();
      bool restart = can_park() && signal_restart_since(gp, h0);
      if (!restart || deadline) return EINTR;
      if (endaddr && *endaddr != addr) return EINTR;  // requeued: the caller must look
      h0 = gp->nhandled;  // the restarted wait counts its own handlers
    }
  }
  if (endaddr) *endaddr = addr;
  if (can_park() && watch_available()) {
    // A goroutine parks on sema like for a private object; a watcher
    // thread relays wakes from other processes (core/sharedwatch.cpp).
    int h = watch_register(addr, val);
    if (h >= 0) {
      G* gp = getg();
      int64_t deadline = dl.abs ? deadline_from_abs(dl.clk, dl.abs) : 0;
      uint32_t h0 = gp->nhandled;
      int r;
      for (;;) {
        r = sema_wait(addr, val, deadline, why, bitset, nullptr,
                      cancellable || cancel_async_type(gp), watch_kick, (void*)(intptr_t)h, lock);
        if (r != EINTR) break;
        if (cancel_async_pending(gp)) {
          watch_unregister(h);
          if (gp->pi_wait) pi_wait_drop_self();  // its record lives in a frame about to go
          cancel_point();
        }
        if (cancellable && cancel_pending(gp)) break;
        if (signal_interrupt_lost(gp, h0)) continue;  // (as above)
        if (!signal_restart_since(gp, h0) || deadline) break;
        h0 = gp->nhandled;  // (as above)
      }
      watch_unregister(h);
      return r;
    }
  }
  if (can_park()) {
    // A goroutine waits in the kernel like a blocking call: its P goes to
    // other goroutines meanwhile. A cancellation point (or any wait, with
    // asynchronous cancellation on) is ended by pthread_cancel: its
    // SIGCANCEL makes the call return EINTR (signal.cpp), or the call sees
    // the cancellation already pending and does not sleep.
    G* gp = getg();
    static const int kNotCancellable = 0;
    int* ch = (int*)(gp->tp + tls::L.cancelhandling);
    bool async = __atomic_load_n(ch, __ATOMIC_RELAXED) & 0x02;  // only gp changes its type
    int r;
    {
      BlockingCall bc(BlockKind::Long, wait_reason_name(why));
      gp->kwait_cancellable = cancellable;
      // [S] status Syscall (bc) before [L] cancelhandling in the call;
      // pthread_cancel stores the canceled bit before it reads the status.
      arch::full_barrier();
      r = kernel_wait(addr, val, dl, bitset, cancellable || async ? ch : &kNotCancellable);
      gp->kwait_cancellable = false;
    }
    if (r == EINTR) act_on_async_cancel(gp);
    return r;
  }
  if (cancellable) return kernel_wait_cancellable(addr, val, dl, bitset);
  if (pi_foreign_waiting() && tcb::self_async_cancel())
    return kernel_wait_pi_async(addr, val, dl, bitset);
  return kernel_wait(addr, val, dl, bitset);
}

int sync_wake(const void* addr, int n, bool shared, uint32_t bitset) {
  if (!shared) return sema_wake(addr, n, bitset);
  // This process's goroutines wait on sema (sharedwatch.cpp); the kernel
  // gets what they did not take (other processes, kernel threads here).
  int k = watch_available() ? sema_wake(addr, n, bitset) : 0;
  if (k >= n) return k;
  long r = bitset == ~0u ? sys::futex_wake_shared(addr, n - k)
                         : sys::futex(addr, FUTEX_WAKE_BITSET, (uint32_t)(n - k), nullptr,
                                      nullptr, bitset);
  return k + (r > 0 ? (int)r : 0);
}

LockRelease sync_release_lock(uint32_t* word, uint32_t contended, uint32_t unlocked,
                              uint32_t wake_above, bool shared) {
  if (!shared) return sema_release_lock(word, contended, unlocked, wake_above);
  if (!watch_available()) {
    if (__atomic_exchange_n(word, unlocked, __ATOMIC_RELEASE) > wake_above)
      sys::futex_wake_shared(word, 1);
    return LockRelease::Freed;
  }
  LockReleaseInfo info;
  LockRelease r = sema_release_lock(word, contended, unlocked, wake_above, &info);
  if (r == LockRelease::Freed && info.old > wake_above && !info.woke)
    sys::futex_wake_shared(word, 1);
  return r;
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
