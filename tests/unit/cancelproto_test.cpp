// The cancellation protocol probe (core/cancelproto.cpp): the running glibc
// is recognized as the protocol its version uses (asynchronous mode around
// the system call up to 2.40, the __syscall_cancel_arch bridge from 2.41),
// and observations that fit neither are not recognized (runtime_init then
// prints the one warning line and runs 1:1).
#include <criterion/criterion.h>
#include <gnu/libc-version.h>
#include <stdio.h>

#include "core/cancelproto.hpp"
#include "core/real.hpp"
#include "core/tls.hpp"

using namespace goshim;

namespace {

int glibc_minor() {
  int major = 0, minor = 0;
  sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor);
  return major == 2 ? minor : 1000;
}

// syscall; ret: what the bridge's end looks like, but in no function.
const unsigned char fake_bridge[] = {0x90, 0x0f, 0x05, 0xc3};

}  // namespace

Test(cancelproto, running_glibc_recognized) {
  real::resolve();
  const char* why = nullptr;
  cr_assert(tls::init(&why), "tls::init: %s", why ? why : "?");
  char cwhy[200] = "";
  cr_assert(cancel_proto_init(cwhy, sizeof cwhy), "not recognized: %s", cwhy);
  CancelProto want = glibc_minor() >= 41 ? CancelProto::Bridge : CancelProto::Async;
  cr_assert_eq((int)cancel_proto(), (int)want, "glibc %s: protocol %d", gnu_get_libc_version(),
               (int)cancel_proto());
}

Test(cancelproto, classify) {
  uintptr_t lo = 0, hi = 0;
  uintptr_t pc_same[2] = {(uintptr_t)&fake_bridge[3], (uintptr_t)&fake_bridge[3]};
  int both_async[2] = {2, 2}, mixed[2] = {2, 0}, none[2] = {0, 0};
  cr_assert_eq((int)cancel_proto_classify(pc_same, both_async, &lo, &hi), (int)CancelProto::Async);
  // one call switched to asynchronous mode, the other did not
  cr_assert_eq((int)cancel_proto_classify(pc_same, mixed, &lo, &hi), (int)CancelProto::Unknown);
  // syscall; ret but no unwind information places it in a function
  cr_assert_eq((int)cancel_proto_classify(pc_same, none, &lo, &hi), (int)CancelProto::Unknown);
  // the two calls interrupted at different places
  uintptr_t pc_diff[2] = {(uintptr_t)&fake_bridge[3], (uintptr_t)&fake_bridge[2]};
  cr_assert_eq((int)cancel_proto_classify(pc_diff, none, &lo, &hi), (int)CancelProto::Unknown);
  // inside a real function, but not after a syscall instruction
  uintptr_t pc_fn[2] = {(uintptr_t)&glibc_minor + 4, (uintptr_t)&glibc_minor + 4};
  cr_assert_eq((int)cancel_proto_classify(pc_fn, none, &lo, &hi), (int)CancelProto::Unknown);
  cr_assert_eq(lo, 0u);
  cr_assert_eq(hi, 0u);
}
