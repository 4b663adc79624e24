// futex(2) served in-process (see futex.hpp).
#include "core/futex.hpp"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>

#include "core/memclass.hpp"
#include "core/runtime.hpp"
#include "core/sema.hpp"
#include "core/signal.hpp"
#include "syscalls/blocking.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

constexpr int kCmdMask = ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);

__attribute__((noinline)) long to_kernel(uint32_t* uaddr, int op, uint32_t val, const struct timespec* timeout,
               uint32_t* uaddr2, uint32_t val3, bool may_block) {
  if (may_block && can_park()) {
    BlockingCall bc(BlockKind::Long, "futex");
    return sys::futex(uaddr, op, val, timeout, uaddr2, val3);
  }
  return sys::futex(uaddr, op, val, timeout, uaddr2, val3);
}

bool valid_timespec(const struct timespec* ts) {
  return ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000;
}

// The kernel wakes at least one waiter whatever nr_wake says (<= 0 too).
inline int wake_count(uint32_t nr) { return (int)nr <= 0 ? 1 : (int)nr; }

inline long wait(uint32_t* uaddr, uint32_t val, int64_t deadline, uint32_t bitset) {
  uint32_t h0 = can_park() ? getg()->nhandled : 0;
  for (;;) {
    int r = sema_wait(uaddr, val, deadline, WaitReason::Futex, bitset);
    switch (r) {
      case 0:
        return 0;
      case EAGAIN:
        return -EAGAIN;
      case ETIMEDOUT:
        return -ETIMEDOUT;
      default:
        break;
    }
    // EINTR. A goroutine: restart as the kernel would (untimed wait and a
    // handler with SA_RESTART); a foreign thread's kernel wait did already.
    // Woken for a signal another G took (signal_interrupt_lost): as the
    // kernel's restart when no handler ran on the thread.
    if (can_park() && signal_interrupt_lost(getg(), h0)) continue;
    if (can_park() && signal_restart_since(getg(), h0) && deadline == 0) {
      h0 = getg()->nhandled;  // the restarted wait counts its own handlers
      continue;
    }
    return -EINTR;
  }
}

// FUTEX_OP_*: *uaddr2 = oldval <op> oparg, atomically; returns oldval.
bool wake_op_apply(uint32_t* uaddr2, uint32_t encoded, int* oldval) {
  int op = (encoded >> 28) & 7;
  int cmp = (encoded >> 24) & 15;
  int oparg = (int)(encoded << 8) >> 20;  // sign-extended 12 bits
  if (encoded & (FUTEX_OP_OPARG_SHIFT << 28)) oparg = 1 << (oparg & 31);
  if (cmp > FUTEX_OP_CMP_GE) return false;
  int* p = (int*)uaddr2;
  switch (op & ~FUTEX_OP_OPARG_SHIFT) {
    case FUTEX_OP_SET:
      *oldval = __atomic_exchange_n(p, oparg, __ATOMIC_SEQ_CST);
      return true;
    case FUTEX_OP_ADD:
      *oldval = __atomic_fetch_add(p, oparg, __ATOMIC_SEQ_CST);
      return true;
    case FUTEX_OP_OR:
      *oldval = __atomic_fetch_or(p, oparg, __ATOMIC_SEQ_CST);
      return true;
    case FUTEX_OP_ANDN:
      *oldval = __atomic_fetch_and(p, ~oparg, __ATOMIC_SEQ_CST);
      return true;
    case FUTEX_OP_XOR:
      *oldval = __atomic_fetch_xor(p, oparg, __ATOMIC_SEQ_CST);
      return true;
    default:
      return false;
  }
}

bool wake_op_cmp(uint32_t encoded, int oldval) {
  int cmp = (encoded >> 24) & 15;
  int cmparg = (int)(encoded << 20) >> 20;  // sign-extended 12 bits
  switch (cmp) {
    case FUTEX_OP_CMP_EQ: return oldval == cmparg;
    case FUTEX_OP_CMP_NE: return oldval != cmparg;
    case FUTEX_OP_CMP_LT: return oldval < cmparg;
    case FUTEX_OP_CMP_LE: return oldval <= cmparg;
    case FUTEX_OP_CMP_GT: return oldval > cmparg;
    default: return oldval >= cmparg;
  }
}

bool valid_op_encoding(uint32_t encoded) {
  int op = (encoded >> 28) & 7;
  int cmp = (encoded >> 24) & 15;
  return op <= FUTEX_OP_XOR && cmp <= FUTEX_OP_CMP_GE;
}

}  // namespace

long futex_syscall(uint32_t* uaddr, int op, uint32_t val, const struct timespec* timeout,
                   uint32_t* uaddr2, uint32_t val3) {
  int cmd = op & kCmdMask;
  bool priv = op & FUTEX_PRIVATE_FLAG;
  bool clockrt = op & FUTEX_CLOCK_REALTIME;
  // 1:1 mode: every thread is a kernel thread, and the kernel serves the
  // call as natively (a non-private word is not classified: that would
  // open /proc/self/maps in the program's fd table, goshim's own file and
  // thread for it being M:N's). A wake also reaches the waiters queued
  // in-process before the mode was decided (constructors' threads).
  if (one_to_one_mode()) {
    long r = to_kernel(uaddr, op, val, timeout, uaddr2, val3, true);
    if (r >= 0 && (cmd == FUTEX_WAKE || (cmd == FUTEX_WAKE_BITSET && val3)) &&
        wake_count(val) > (int)r)
      r += sema_wake(uaddr, wake_count(val) - (int)r, cmd == FUTEX_WAKE_BITSET ? val3 : ~0u);
    return r;
  }
  switch (cmd) {
    case FUTEX_WAIT:
    case FUTEX_WAKE:
    case FUTEX_WAIT_BITSET:
    case FUTEX_WAKE_BITSET:
    case FUTEX_REQUEUE:
    case FUTEX_CMP_REQUEUE:
    case FUTEX_WAKE_OP:
      break;
    default:
      return to_kernel(uaddr, op, val, timeout, uaddr2, val3, true);
  }
  // As the kernel: the realtime clock only for absolute (bitset) waits.
  if (clockrt && cmd != FUTEX_WAIT_BITSET) return -ENOSYS;
  if ((uintptr_t)uaddr % 4) return -EINVAL;
  bool two = cmd == FUTEX_REQUEUE || cmd == FUTEX_CMP_REQUEUE || cmd == FUTEX_WAKE_OP;
  if (two && (uintptr_t)uaddr2 % 4) return -EINVAL;
  // The kernel faults (EFAULT) where it reads or writes a word; a wake of
  // address 0 touches nothing and wakes nobody. (Other bad addresses are
  // not probed: the access below faults as the program's own would.)
  bool reads1 = cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET || cmd == FUTEX_CMP_REQUEUE;
  if ((reads1 && !uaddr) || (cmd == FUTEX_WAKE_OP && !uaddr2)) return -EFAULT;
  // Memory shared with another process: the kernel's futex, plus a wake of
  // any in-process waiter (there should be none).
  if (!priv && (memclass_shared(uaddr) || (two && memclass_shared(uaddr2)))) {
    bool waits = cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET;
    if (waits && !(timeout && !valid_timespec(timeout)) && !(cmd == FUTEX_WAIT_BITSET && !val3) &&
        __atomic_load_n(uaddr, __ATOMIC_SEQ_CST) != val) {
      // The kernel would say EAGAIN as well (its check could have run at
      // this instant); saying it here keeps the P: a blocking call hands
      // it to other goroutines first, and this one would wait for it.
      return -EAGAIN;
    }
    long r = to_kernel(uaddr, op, val, timeout, uaddr2, val3, waits);
    if (!waits && r >= 0 && (cmd == FUTEX_WAKE || cmd == FUTEX_WAKE_BITSET))
      r += sema_wake(uaddr, wake_count(val), cmd == FUTEX_WAKE_BITSET ? val3 : ~0u);
    return r;
  }

  switch (cmd) {
    case FUTEX_WAIT: {
      int64_t deadline = 0;  // the timeout is relative, on CLOCK_MONOTONIC
      if (timeout) {
        if (!valid_timespec(timeout)) return -EINVAL;
        int64_t rel = (int64_t)timeout->tv_sec * 1000000000 + timeout->tv_nsec;
        deadline = sys::nanotime() + rel;
        if (deadline <= 0) deadline = 1;
      }
      return wait(uaddr, val, deadline, FUTEX_BITSET_MATCH_ANY);
    }
    case FUTEX_WAIT_BITSET: {
      if (val3 == 0) return -EINVAL;
      int64_t deadline = 0;
      if (timeout) {
        if (!valid_timespec(timeout)) return -EINVAL;
        deadline = deadline_from_abs(clockrt ? CLOCK_REALTIME : CLOCK_MONOTONIC, timeout);
      }
      return wait(uaddr, val, deadline, val3);
    }
    case FUTEX_WAKE:
      return sema_wake(uaddr, wake_count(val));
    case FUTEX_WAKE_BITSET:
      if (val3 == 0) return -EINVAL;
      return sema_wake(uaddr, wake_count(val), val3);
    case FUTEX_REQUEUE:
    case FUTEX_CMP_REQUEUE: {
      int nr_wake = (int)val;
      int nr_requeue = (int)(long)timeout;
      if (nr_wake < 0 || nr_requeue < 0) return -EINVAL;
      return sema_requeue(uaddr, uaddr2, nr_wake, nr_requeue, cmd == FUTEX_CMP_REQUEUE, val3);
    }
    default: {  // FUTEX_WAKE_OP
      if (!valid_op_encoding(val3)) return -ENOSYS;
      int oldval = 0;
      if (!wake_op_apply(uaddr2, val3, &oldval)) return -ENOSYS;
      long n = sema_wake(uaddr, wake_count(val));
      if (wake_op_cmp(val3, oldval)) n += sema_wake(uaddr2, wake_count((uint32_t)(long)timeout));
      return n;
    }
  }
}

}  // namespace goshim
