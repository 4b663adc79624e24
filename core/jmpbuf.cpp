// Where a longjmp goes (core/jmpbuf.hpp).
#include "core/jmpbuf.hpp"

#include <setjmp.h>

#include "arch/arch.hpp"
#include "core/rawlog.hpp"

namespace goshim {
namespace {

// The pointer guard as jmpbuf_unmangle needs it; valid once known.
uintptr_t key = 0;
bool known = false;

// _setjmp's record of the caller at this frame: the key its stack pointer
// word implies.
[[gnu::noinline]] uintptr_t probe_key(uintptr_t* sp_out) {
  jmp_buf buf;
  uintptr_t sp = 0;
  goshim_jmpbuf_probe(buf, &sp);
  *sp_out = sp;
  const uintptr_t* w = (const uintptr_t*)buf[0].__jmpbuf;
  return arch::jmpbuf_unmangle(w[arch::kJmpBufSp], sp);
}

// The same one frame deeper and 4 KiB further down the stack.
[[gnu::noinline]] uintptr_t probe_key_deeper(uintptr_t* sp_out) {
  volatile char pad[4096];
  pad[0] = 0;
  uintptr_t k = probe_key(sp_out);
  __asm__ volatile("" ::"r"(&pad[0]) : "memory");
  return k;
}

}  // namespace

void jmpbuf_init() {
  uintptr_t sp1 = 0, sp2 = 0;
  uintptr_t k1 = probe_key(&sp1);
  uintptr_t k2 = probe_key_deeper(&sp2);
  // Two different stack pointers that imply one key: the word holds the
  // stack pointer, mangled as arch.hpp says.
  if (sp1 != 0 && sp2 != 0 && sp1 != sp2 && k1 == k2) {
    key = k1;
    known = true;
    return;
  }
  rawlog("goshim: the C library's jmp_buf layout is not the one goshim knows; a signal "
         "handler left by longjmp is then seen as left only when another handler returns\n");
}

uintptr_t jmpbuf_sp(const void* env) {
  if (!known || !env) return 0;
  const uintptr_t* w = (const uintptr_t*)((const struct __jmp_buf_tag*)env)->__jmpbuf;
  return arch::jmpbuf_unmangle(w[arch::kJmpBufSp], key);
}

}  // namespace goshim
