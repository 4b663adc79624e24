// Blocking-call handoff (DESIGN.md decision 6): Go's entersyscall /
// exitsyscall around a libc call that may block in the kernel and cannot
// be polled (regular-file I/O, waitpid, flock, getaddrinfo, ...).
//
//   {
//     BlockingCall bc(BlockKind::Short, "read");
//     r = real_read(fd, buf, n);
//   }
//
// While the call runs, the G keeps its M but its P is in PStatus::Syscall:
// sysmon retakes it after ~20 µs if there is other work (Short), or it is
// handed to another M at once when runnable work is waiting (Long: calls
// that usually block for long, such as waitpid or sigwait). On return the M
// takes its P back if it is still free (the fast path), else any idle P,
// else it queues the G on the global queue and goes idle.
//
// Contract: on user G only (the shim checks), never while holding a runtime
// lock. errno is preserved across exit_blocking.
#pragma once

#include "core/gmp.hpp"

namespace goshim {

enum class BlockKind : uint8_t {
  Short,  // usually fast (page-cache file I/O): sysmon hands the P off if it lasts
  Long,   // usually slow: hand the P off at once if anything else can run
};

// On user G.
void enter_blocking(BlockKind kind, const char* what);
void exit_blocking();

class BlockingCall {
 public:
  BlockingCall(BlockKind kind, const char* what) { enter_blocking(kind, what); }
  ~BlockingCall() { exit_blocking(); }
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;
};

// glibc's cancellation unwinds the stack with _Unwind_ForcedUnwind, which
// runs no destructor in goshim's C++ (built without exception tables): a
// BlockingCall around a libc function that is a cancellation point
// (waitpid, open, system, ...) would be left without exit_blocking, and the
// G would run on without a P. blocking_cancellable runs fn in a blocking
// section whose exit also runs when cancellation unwinds through it (a C
// frame with a cleanup, syscalls/blocking_unwind.c).
extern "C" void goshim_call_unwind_guarded(void (*fn)(void*), void* ctx);

// Runs fn(ctx), a libc function that is a cancellation point called while
// goshim holds something (a descriptor's reference, a mode it changed),
// and runs cleanup(cctx) only if glibc's cancellation unwinds through it
// (the caller undoes it itself on return). Any thread.
extern "C" long goshim_call_undo_on_unwind(long (*fn)(void*), void* ctx, void (*cleanup)(void*),
                                           void* cctx);

// Marks the calling G as inside such a guarded section (the SIGCANCEL
// handler unwinds a G in a blocking section only there).
void blocking_guarded(bool on);

template <typename F>
auto blocking_cancellable(BlockKind kind, const char* what, F&& fn) -> decltype(fn()) {
  enter_blocking(kind, what);
  blocking_guarded(true);
  if constexpr (__is_same(decltype(fn()), void)) {
    goshim_call_unwind_guarded([](void* c) { (*(F*)c)(); }, &fn);
    blocking_guarded(false);
    exit_blocking();
  } else {
    decltype(fn()) r;
    auto body = [&] { r = fn(); };
    goshim_call_unwind_guarded([](void* c) { (*(decltype(body)*)c)(); }, &body);
    blocking_guarded(false);
    exit_blocking();
    return r;
  }
}

}  // namespace goshim
