// The start-up checks of glibc's private layout (core/tls.cpp): on the
// running glibc every check passes (and the probe saw cancellation unwind to
// goshim's buffer); a probe altered in any one of the facts goshim relies on
// is refused with its own reason, which runtime_init prints as the one
// "goshim: warning: <reason>; running every thread as a kernel thread (no
// M:N)" line before running 1:1.
#include <criterion/criterion.h>
#include <gnu/libc-version.h>
#include <stdio.h>
#include <string.h>

#include "arch/arch.hpp"
#include "core/real.hpp"
#include "core/tls.hpp"

using namespace goshim;

namespace {

int glibc_minor() {
  int major = 0, minor = 0;
  sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor);
  return major == 2 ? minor : 1000;
}

// The running glibc's probe. False on a glibc older than 2.34, where
// goshim refuses M:N before any probe (LD_PRELOAD.md 1.1): that refusal is
// then what is checked, and there is no probe to alter.
bool real_probe(tls::Probe* out) {
  real::resolve();
  const char* why = nullptr;
  bool ok = tls::init(&why);
  if (glibc_minor() < 34) {
    cr_assert(!ok, "tls::init accepted glibc %s", gnu_get_libc_version());
    return false;
  }
  cr_assert(ok, "tls::init refused this glibc: %s", why ? why : "(no reason)");
  *out = tls::last_probe;
  return true;
}

// The probe with one fact altered must be refused, naming that fact.
void refused(const tls::Probe& p, const char* reason_part) {
  const char* why = tls::check_probe(p);
  cr_assert(why, "an altered probe was accepted (expected: %s)", reason_part);
  cr_assert(strstr(why, reason_part), "reason '%s' does not name '%s'", why, reason_part);
}

}  // namespace

Test(tls, running_glibc_passes_every_check) {
  tls::Probe p;
  if (!real_probe(&p)) return;
  cr_assert_null(tls::check_probe(p));
  cr_assert(p.cancel_landed && !p.cancel_returned);
  cr_assert_eq(p.ch_start, 0);
  cr_assert_eq(p.ch_async, 2);     // CANCELTYPE
  cr_assert_eq(p.ch_disabled, 1);  // CANCELSTATE
  cr_assert(p.ch_joined & 16);     // EXITING
  cr_assert_gt(tls::L.cancelhandling, 0u);
  cr_assert_eq(tls::L.cleanup_jmp_buf, tls::L.cancelhandling - 8);
}

Test(tls, struct_pthread_offsets_mismatch_refused) {
  tls::Probe real;
  if (!real_probe(&real)) return;
  tls::Probe p = real;
  p.stackblock_hits = 2;
  refused(p, "stackblock");
  p = real;
  p.robust_head = p.self;
  refused(p, "robust_head");
  p = real;
  p.robust_prev = 0;
  refused(p, "robust_prev");
  p = real;
  p.res = p.self + tls::L.sizeof_pthread;
  refused(p, "resolver state");
  p = real;
  p.resp_tls = 0;
  refused(p, "__resp");
  p = real;
  p.specific0 = 0;
  refused(p, "specific_1stblock");
  p = real;
  p.cleanup_jmp_buf_val = 0;
  refused(p, "cleanup_jmp_buf");
  if (!arch::kTlsVariantI) {  // aarch64's tcbhead_t has no multiple_threads
    p = real;
    p.multiple_threads = 0;
    refused(p, "multiple_threads");
  }
}

Test(tls, tcbhead_mismatch_refused) {
  // aarch64's tcbhead_t is {dtv, private}: no self pointers, no guards.
  if (arch::kTlsVariantI) cr_skip_test("variant I (aarch64): tcbhead_t has none of these fields");
  tls::Probe real;
  if (!real_probe(&real)) return;
  tls::Probe p = real;
  p.tcb_self = 0;
  refused(p, "self pointers");
  p = real;
  p.stack_guard ^= 1;
  refused(p, "guards");
  p = real;
  p.pointer_guard ^= 1;
  refused(p, "guards");
}

Test(tls, rseq_mismatch_refused) {
  tls::Probe p;
  if (!real_probe(&p)) return;
  p.rseq_unregister_failed = true;
  refused(p, "rseq");
}

Test(tls, cancellation_mismatch_refused) {
  tls::Probe real;
  if (!real_probe(&real)) return;
  tls::Probe p = real;
  p.ch_async = 4;  // the type bit elsewhere
  refused(p, "state and type bits");
  p = real;
  p.ch_disabled = 2;
  refused(p, "state and type bits");
  p = real;
  p.ch_start = 8;  // a bit set nobody asked for
  refused(p, "state and type bits");
  p = real;
  p.ch_joined = 32;  // ended without EXITING
  refused(p, "EXITING");
  p = real;
  p.ch_joined = -1;  // the TCB could not be read
  refused(p, "EXITING");
  p = real;
  p.cancel_landed = false;  // glibc did not act on goshim's bits
  p.cancel_returned = true;
  refused(p, "did not unwind");
  p = real;
  p.cancel_landed = false;  // glibc unwound past goshim's buffer
  refused(p, "did not unwind");
}
