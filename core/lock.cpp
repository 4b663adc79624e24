// Runtime futex mutex and Note (see lock.hpp).
#include "core/lock.hpp"

#include <errno.h>
#include <sched.h>
#include <time.h>

#include "arch/arch.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

void Mutex::lock_slow() {
  // Spin briefly: runtime critical sections are a few hundred instructions.
  for (int i = 0; i < 100; i++) {
    uint32_t v = state_.load(std::memory_order_relaxed);
    if (v == 0) {
      uint32_t z = 0;
      if (state_.compare_exchange_weak(z, 1, std::memory_order_acquire)) return;
    }
    arch::cpu_relax();
  }
  // Mark contended and sleep in the kernel until the holder wakes us.
  while (state_.exchange(2, std::memory_order_acquire) != 0) {
    sys::futex_wait(&state_, 2, nullptr);
  }
}

void Mutex::unlock_slow() { sys::futex_wake(&state_, 1); }

void spin_yield() {
  long pol = sys::sched_getscheduler(0);
  if (pol >= 0 && ((pol & ~SCHED_RESET_ON_FORK) == SCHED_FIFO || (pol & ~SCHED_RESET_ON_FORK) == SCHED_RR)) {
    struct timespec ts = {0, 50 * 1000};
    sys::nanosleep(&ts, nullptr);
  } else {
    sys::sched_yield();
  }
}

void SpinLock::lock_slow() {
  for (int spins = 0;;) {
    while (v_.load(std::memory_order_relaxed)) {
      if (++spins < 256)
        arch::cpu_relax();
      else
        spin_yield();
    }
    if (!v_.exchange(1, std::memory_order_acquire)) return;
  }
}

void Note::wakeup() {
  if (key_.exchange(1, std::memory_order_release) == 0) {
    sys::futex_wake(&key_, 1);
  }
}

void Note::sleep() {
  while (key_.load(std::memory_order_acquire) == 0) {
    sys::futex_wait(&key_, 0, nullptr);
  }
}

bool Note::sleep_for(int64_t ns) {
  int64_t deadline = sys::nanotime() + ns;
  while (key_.load(std::memory_order_acquire) == 0) {
    int64_t left = deadline - sys::nanotime();
    if (left <= 0) return false;
    struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
    sys::futex_wait(&key_, 0, &ts);
  }
  return true;
}

}  // namespace goshim
