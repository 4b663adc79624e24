// goshim's own kernel threads (Ms, sysmon, the privfd thread, the M
// starter, shared-futex watchers): created detached through libc's
// pthread_create, never seen by a credential broadcast half-made
// (setxid.hpp), and started with
// every signal blocked but SIGSETXID until they have set tls_g
// (signal_create_begin in signal.hpp).
#pragma once

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

namespace goshim {

// Starts fn(arg) on a new detached kernel thread with a stack of
// stack_size bytes (0: libc's default). *start_mask, if given, receives
// the caller's signal mask before the thread can run (an M restores the
// program's mask from it); *tid, if given, its kernel tid. Returns 0 or
// pthread_create's error. Any thread.
int ownthread_start(void* (*fn)(void*), void* arg, size_t stack_size,
                    uint64_t* start_mask = nullptr, pid_t* tid = nullptr);

// Whether the process allocator is the program's own (its executable, or
// a library loaded before libgoshim.so, defines calloc), not goshim's
// jemalloc: glibc's pthread_create then callocs through it, so goshim must
// not create a thread where the program may hold that allocator's lock
// (inside any of its calls). Any thread, after real::resolve.
bool own_allocator();

// A request to the M starter (core/runtime.cpp) to start fn(arg) on a
// kernel thread of goshim's own (ownthread_start, stack_size bytes), for
// code that must not call pthread_create itself when own_allocator() (a
// shared-futex watcher). failed(arg, err), if given, is called on the
// starter if the thread cannot be created. The record must stay valid
// until fn runs or failed is called.
struct OwnThreadReq {
  void* (*fn)(void*);
  void* arg;
  size_t stack_size;
  void (*failed)(void* arg, int err);
  OwnThreadReq* next;  // the starter's queue
};

// Queues req for the M starter; false (nothing queued) when the starter is
// not running (the process allocator is goshim's, before runtime init, in
// a fork child before its threads are started). Lock-free, Any thread.
bool ownthread_start_async(OwnThreadReq* req);

}  // namespace goshim
