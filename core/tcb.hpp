// The calling thread's own glibc TCB fields that synchronization needs:
// its tid (THREAD_SELF->tid, the owner recorded in mutexes and rwlocks) and
// its robust-mutex list head. Any thread: a goroutine's TCB holds its
// unique virtual tid and a list goshim walks when the G exits; a foreign
// kernel thread's holds its kernel tid and the list the kernel walks when
// it dies.
//
// The offsets are found in a constructor (tcb::early_init) from glibc's
// libthread_db descriptor and get_robust_list(2), long before the runtime
// starts; code that runs even earlier (jemalloc's first malloc) falls back
// to one system call.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <atomic>

#include "arch/arch.hpp"

namespace goshim::tcb {

// glibc's struct robust_list_head (linux/futex.h), at THREAD_SELF->robust_head.
struct RobustHead {
  void* list;               // first entry (&mutex->__list.__next), or &list when empty
  long futex_offset;        // entry + futex_offset = the mutex's lock word
  void* list_op_pending;    // entry being locked or unlocked right now
};

// Offsets into struct pthread; 0 until early_init ran.
extern constinit std::atomic<size_t> tid_off;
// Variant I (aarch64): sizeof(struct pthread), which lies just below the
// thread pointer (THREAD_SELF = tp - pd_below); found by early_init.
extern constinit std::atomic<size_t> pd_below;
extern constinit std::atomic<size_t> robust_off;
extern constinit std::atomic<size_t> cancel_off;

// Finds the offsets. Any thread, idempotent; called from a constructor.
void early_init();
// Where cancelhandling lies in the calling thread's TCB (me), found by
// flipping the cancel state and type with glibc's functions, for a glibc
// without libthread_db's descriptor (before 2.34). 0 if not found. Not
// while a cancellation may be pending.
size_t find_cancel_offset(uintptr_t me);

// The robust list head of the struct pthread at pd (size bytes), found
// without get_robust_list(2), which qemu-user does not implement (ENOSYS):
// glibc initializes every thread's head as {&head, futex_offset, NULL}
// with robust_prev (the word below) = &head. 0 if not found exactly once.
uintptr_t scan_robust_head(uintptr_t pd, size_t size);

// struct pthread's address relative to the thread pointer, modular: 0 on
// x86-64, -sizeof(struct pthread) on aarch64 (pd_below). Any thread, also
// before early_init (it then looks the size up itself).
size_t pd_from_tp();

// THREAD_SELF: the caller's struct pthread (x86-64: tcbhead_t.self at
// %fs:0x10; aarch64: tp - sizeof(struct pthread)).
inline uintptr_t self() {
#if defined(__x86_64__)
  uintptr_t s;
  __asm__("movq %%fs:0x10, %0" : "=r"(s));
  return s;
#else
  return arch::get_tp() - pd_below.load(std::memory_order_relaxed);
#endif
}

pid_t slow_tid();

// The caller's tid as glibc records it in the objects it owns. Signal-safe.
inline pid_t self_tid() {
  size_t off = tid_off.load(std::memory_order_relaxed);
  if (__builtin_expect(off != 0, 1)) {
#if defined(__x86_64__)
    pid_t t;
    __asm__("movl %%fs:(%1), %0" : "=r"(t) : "r"(off));  // THREAD_SELF == tp on x86-64
    return t;
#else
    return *(const volatile pid_t*)(self() + off);
#endif
  }
  return slow_tid();
}

// The owner id to record in a process-shared object. A kernel thread's
// tid is unique system-wide; virtual tids are handed out the same way in
// every goshim process (main is always the first), so a goroutine's is
// moved by a per-process offset: ids of goroutines of two processes that
// share an object then (almost surely, 1 in 2^30) differ. The result
// stays in the virtual range, so it never equals a kernel tid. Any thread.
pid_t shared_tid_of(pid_t tid);
inline pid_t shared_tid() { return shared_tid_of(self_tid()); }
// The inverse for this process: the virtual tid whose shared id is sid (a
// virtual id; for another process's goroutine, some virtual tid that is
// almost surely no live goroutine here). A kernel tid is returned as is.
pid_t tid_of_shared(pid_t sid);
// Recomputes the per-process offset (after fork, in the child).
void reset_shared_offset();

// Whether glibc's cancellation is pending for the calling thread (its
// THREAD_SELF->cancelhandling: canceled, enabled, not exiting), as
// pthread_testcancel would act on it. Any thread; false if unknown.
bool self_cancel_pending();

// Whether the calling thread is in glibc's asynchronous cancellation mode
// (enabled, asynchronous, not exiting): glibc's SIGCANCEL handler then
// unwinds it wherever the signal lands. False if unknown (no offset).
bool self_async_cancel();
// Whether a cancellation request has reached the calling thread, in any
// mode and state (CANCELING or CANCELED set, not exiting). False if unknown.
bool self_cancel_requested();

// The caller's robust list head (nullptr if it cannot be found).
RobustHead* self_robust();

// The robust list head of the TCB at tp (a goroutine's, at its exit).
inline RobustHead* robust_of(uintptr_t tp) {
  size_t off = robust_off.load(std::memory_order_relaxed);
  return off ? (RobustHead*)(tp - pd_below.load(std::memory_order_relaxed) + off) : nullptr;
}

}  // namespace goshim::tcb
