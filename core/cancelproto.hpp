// How the running glibc acts on SIGCANCEL in a thread blocked in one of its
// cancellable system calls, found at run time (cancelproto.cpp says how).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace goshim {

enum class CancelProto : int {
  Unknown = 0,
  Async,   // glibc <= 2.40: asynchronous cancellation around the system call
  Bridge,  // glibc >= 2.41: the interrupted pc lies in __syscall_cancel_arch
};

// Probes the protocol. On the initial thread, after tls::init, before any G
// exists. Returns false with a one-line reason in why when it is not
// recognized (the caller then runs every thread as a kernel thread).
bool cancel_proto_init(char* why, size_t n);

CancelProto cancel_proto();

// The decision of cancel_proto_init from what its two probe calls saw (the
// interrupted pc and cancelhandling of each; pc[0] is read as code): Async,
// Bridge with the bridge's range in [*lo, *hi), or Unknown. Exposed for
// tests/unit/cancelproto_test.cpp.
CancelProto cancel_proto_classify(const uintptr_t pc[2], const int ch[2], uintptr_t* lo,
                                  uintptr_t* hi);

// Whether pc lies in glibc's cancellable system call bridge
// [__syscall_cancel_arch_start, __syscall_cancel_arch_end) (Bridge
// protocol; always false otherwise). Signal-safe.
bool cancel_in_glibc_bridge(uintptr_t pc);

}  // namespace goshim

// goshim's own cancellable system call (arch/<arch>/cancel_syscall.S).
extern "C" long goshim_cancellable_syscall(const int* ch, long nr, long a1, long a2, long a3, long a4,
                                           long a5, long a6);
extern "C" const char goshim_cancel_sc_start[];
extern "C" const char goshim_cancel_sc_end[];
