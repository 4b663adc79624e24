// goshim's own kernel threads (see ownthread.hpp).
#include "core/ownthread.hpp"

#include <pthread.h>

#include "core/real.hpp"
#include "core/setxid.hpp"
#include "core/signal.hpp"
#include "core/tcb.hpp"

namespace goshim {

int ownthread_start(void* (*fn)(void*), void* arg, size_t stack_size, uint64_t* start_mask,
                    pid_t* tid) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (stack_size) pthread_attr_setstacksize(&attr, stack_size);
  pthread_t th;
  setxid_thread_create_begin();  // a credential broadcast must not miss it
  uint64_t saved = signal_create_begin();
  if (start_mask) *start_mask = saved;
  int err = real::pthread_create(&th, &attr, fn, arg);
  // Its kernel tid: the kernel wrote it into the new TCB before clone
  // returned (CLONE_PARENT_SETTID).
  if (tid && err == 0) *tid = *(volatile pid_t*)((uintptr_t)th + tcb::tid_off.load(std::memory_order_relaxed));
  signal_create_end(saved);
  setxid_thread_create_end();
  pthread_attr_destroy(&attr);
  return err;
}

}  // namespace goshim
