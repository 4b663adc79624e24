// goshim's own kernel threads (Ms, sysmon, the privfd thread, the M
// starter, shared-futex watchers): created detached through libc's
// pthread_create, never seen by a credential broadcast half-made
// (setxid.hpp), and started with
// every signal blocked but SIGSETXID until they have set tls_g
// (signal_create_begin in signal.hpp).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace goshim {

// Starts fn(arg) on a new detached kernel thread with a stack of
// stack_size bytes (0: libc's default). *start_mask, if given, receives
// the caller's signal mask before the thread can run (an M restores the
// program's mask from it). Returns 0 or pthread_create's error. Any thread.
int ownthread_start(void* (*fn)(void*), void* arg, size_t stack_size,
                    uint64_t* start_mask = nullptr);

}  // namespace goshim
