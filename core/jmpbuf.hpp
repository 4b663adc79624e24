// Where a longjmp goes: the stack pointer saved in a glibc jmp_buf.
//
// glibc stores the registers of setjmp's caller in the jmp_buf, the stack
// pointer among them mangled with the process's pointer guard. Which word
// holds it and how it is mangled are glibc-private facts (arch.hpp:
// kJmpBufSp, jmpbuf_unmangle); jmpbuf_init checks them at start-up by
// calling the C library's _setjmp at two known stack pointers, and learns
// the key. If they do not check out, jmpbuf_sp answers 0 (unknown) and
// goshim falls back to what it did without it (core/signal.cpp
// signal_longjmp: handler depths are then only corrected when a handler
// returns).
#pragma once

#include <stdint.h>

namespace goshim {

// Once, at start-up (signal_init). Logs one line if the layout does not
// check out.
void jmpbuf_init();

// The stack pointer a longjmp to env (a jmp_buf / sigjmp_buf) resumes with,
// or 0 when unknown. Signal-safe.
uintptr_t jmpbuf_sp(const void* env);

}  // namespace goshim
