// Goroutine lifecycle: creation (pthread_create), exit (return, pthread_exit),
// join and detach, and the G arena that maps a pthread_t to its G.
#pragma once

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/gmp.hpp"

namespace goshim {

// What pthread_create's attribute asks for, already validated by the shim.
struct CreateAttr {
  bool detached = false;
  size_t stack_size = 0;      // 0: the default
  uintptr_t stack_lo = 0;     // non-zero: a user-supplied stack [lo, lo+size)
  size_t guard_size = 0;
  bool guard_set = false;     // false: the default guard
  int sched_policy = 0;
  int sched_priority = 0;
  bool has_sigmask = false;
  uint64_t sigmask = 0;
};

// Creates a G running fn(arg). Writes *out before the G can run. Any thread
// once the runtime is up (a foreign thread's G goes to the global queue).
// Returns 0 or EAGAIN.
int thread_create(const CreateAttr& a, void* (*fn)(void*), void* arg, pthread_t* out);

// Joins target. deadline: 0 waits forever, -1 only tries (EBUSY), else an
// absolute monotonic deadline (ETIMEDOUT). Returns 0, EDEADLK, EINVAL,
// ESRCH, EBUSY or ETIMEDOUT, as glibc does.
int thread_join(G* target, void** ret, int64_t deadline);
// Returns 0 or EINVAL (already detached).
int thread_detach(G* target);

// On user G. Ends the current G after glibc's unwinding (pthread_exit or
// a cancellation: unwound) or the return of its start routine landed in
// its entry frame.
[[noreturn]] void thread_exit_landed(bool unwound = true);

// The G whose pthread_t (its TCB address) is t, or nullptr when t is not a
// live goroutine (a foreign kernel thread, or a freed G).
G* g_from_pthread(pthread_t t);
// The error glibc gives for a join or detach of a t that g_from_pthread
// does not find: EINVAL for a detached goroutine that exited (its slot
// still says detached until it is reused, like glibc's cached
// descriptor), ESRCH otherwise (joined already, or no goroutine).
int gone_thread_error(pthread_t t);
// gp has finished running (a zombie waiting for its joiner, or a detached
// G on its way to the free list).
bool thread_exited(G* gp);

// Whether t is the pthread_t of a goroutine slot (main or the arena),
// live or not: such a value must never reach glibc (its tid is virtual).
bool is_goshim_tp(pthread_t t);

// The G whose virtual tid is vtid, or nullptr (not a goroutine slot).
// Any thread: slots are type-stable, but the G may be exiting or recycled
// by the time the caller looks at it (good for hints only).
G* g_from_vtid(int32_t vtid);

// G1: main.
G* main_g();

// Called at G exit, on the G, after thread_local destructors: runs the
// pthread key destructors (installed by shim/pthread_key.cpp).
extern void (*g_exit_hook)(G* gp);

// More G-exit hooks, run in registration order after g_exit_hook (e.g. the
// robust-mutex owner-death walk of shim/pthread_mutex.cpp, which must run
// after key destructors as the kernel's does after the thread is gone).
// Registration happens at start-up; returns false when the table is full.
bool add_g_exit_hook(void (*fn)(G* gp));

// Virtual tids (G::vtid) are at or above this value: above PID_MAX_LIMIT,
// so they never equal a kernel tid.
inline constexpr int32_t kVtidBase = 1 << 22;
inline bool is_virtual_tid(int32_t tid) { return tid >= kVtidBase; }

// Arena bookkeeping (runtime.cpp sets it up).
void arena_init();
uintptr_t arena_slot_tp(size_t idx);
size_t arena_nslots();
G* arena_slot_g(size_t idx);

// The arena is MADV_DONTDUMP (a core would walk all its ~16 TiB). Before a
// core-dumping default action: puts the slots of live goroutines (stack,
// TLS block; the crashing one's, self, first) and the used prefix of the
// G array back into the core, at most kCoreMaxSlots (4096) slots in at most
// kCoreMaxRanges (1024) madvise calls (each may split the mapping: bounded
// against vm.max_map_count). Signal-safe; only the first call does it.
void arena_core_dump_mark(G* self);

// sysmon: returns the stack pages of free Gs that sat on the global free
// list for a while to the kernel (slots with stacks, proc.cpp). Without P,
// no locks held.
void gfree_scavenge(int64_t now);

// Allocates a slot with a zeroed TLS block (for an M's g0 on the initial
// thread). Returns its tp, or 0.
uintptr_t arena_alloc_tls_only();

}  // namespace goshim
