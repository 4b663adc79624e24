// core/real: the one table of symbols goshim finds at run time and its
// resolver. Every entry resolves on this glibc (when its `since` allows) to
// exactly what dlsym/dlvsym give (from glibc 2.36; see by_glibc), versioned entries to that version of the
// defining library, the default version where a symbol has several; the
// resolver allocates nothing (glibc < 2.34's dlsym callocs, which booted
// jemalloc inside goshim's constructor and deadlocked); lazy use works
// before resolve() and from any thread.
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.hpp"
#include "core/real.hpp"

using namespace goshim;

namespace {

int glibc_version() {
  int major = 0, minor = 0;
  const char* v = gnu_get_libc_version();
  for (; *v >= '0' && *v <= '9'; v++) major = major * 10 + (*v - '0');
  if (*v == '.')
    for (v++; *v >= '0' && *v <= '9'; v++) minor = minor * 10 + (*v - '0');
  return major * 100 + minor;
}

// What glibc's own lookup gives for an entry (a TLS entry: the offset of
// this thread's instance from the thread pointer). Before glibc 2.36,
// dlsym(RTLD_NEXT) took a symbol's oldest version instead of its default
// one (glibc bug 14932; e.g. posix_spawn@GLIBC_2.2.5, the compat version,
// instead of posix_spawn@@GLIBC_2.15, which programs bind to): the resolver
// takes the default version as glibc 2.36 does, which RTLD_DEFAULT gives
// there (this executable defines none of the table's names, so both
// handles search the same objects).
uintptr_t by_glibc(const real::Entry& e) {
  void* h = e.scope == real::Scope::Next && glibc_version() >= 236 ? RTLD_NEXT : RTLD_DEFAULT;
  void* p = e.version ? dlvsym(h, e.name, e.version) : dlsym(h, e.name);
  if (e.scope == real::Scope::AnyTls) return p ? (uintptr_t)p - arch::get_tp() : 0;
  return (uintptr_t)p;
}

// Allocations made by this thread while `counting` (the test executable's
// malloc family wraps glibc's). Not under AddressSanitizer, which owns them.
__thread bool counting;
__thread int allocations;

}  // namespace

#ifndef __SANITIZE_ADDRESS__
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* malloc(size_t n) {
  if (counting) allocations++;
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t s) {
  if (counting) allocations++;
  return __libc_calloc(n, s);
}
void* realloc(void* p, size_t n) {
  if (counting) allocations++;
  return __libc_realloc(p, n);
}
}
#endif

Test(real, every_entry_as_glibc_finds_it) {
  int ver = glibc_version();
  for (unsigned i = 0; i < real::kEntries; i++) {
    const real::Entry& e = real::table[i];
    uintptr_t want = by_glibc(e);
    uintptr_t got = real::find(e.name, e.scope, e.version);
    cr_expect_eq(got, want, "%s: resolver %#lx, dl%ssym %#lx", e.name, (unsigned long)got,
                 e.version ? "v" : "", (unsigned long)want);
    if (e.since <= ver) cr_expect_neq(got, 0u, "%s: missing on glibc %d (since %d)", e.name, ver,
                                      e.since);
  }
}

Test(real, resolve_fills_the_cache) {
  cr_assert(!real::resolved());
  real::resolve();
  cr_assert(real::resolved());
  for (unsigned i = 0; i < real::kEntries; i++) {
    const real::Entry& e = real::table[i];
    uintptr_t cached = *(const uintptr_t*)e.cache;
    cr_expect_eq(cached, by_glibc(e), "%s: cached %#lx", e.name, (unsigned long)cached);
  }
  cr_expect_eq((void*)real::sigaction, dlsym(RTLD_DEFAULT, "sigaction"));
  cr_expect_eq((void*)real::read, dlsym(RTLD_DEFAULT, "read"));
}

// Versioned entries are that version of the library that defines it.
Test(real, versioned_entries_from_their_library) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
#if defined(__aarch64__)
  void* ldso = dlopen("ld-linux-aarch64.so.1", RTLD_NOW | RTLD_NOLOAD);
#else
  void* ldso = dlopen("ld-linux-x86-64.so.2", RTLD_NOW | RTLD_NOLOAD);
#endif
  cr_assert_not_null(libc);
  cr_assert_not_null(ldso);
  int n = 0;
  for (unsigned i = 0; i < real::kEntries; i++) {
    const real::Entry& e = real::table[i];
    if (!e.version || e.since > glibc_version()) continue;
    void* want = dlvsym(libc, e.name, e.version);
    if (!want) want = dlvsym(ldso, e.name, e.version);
    cr_assert_not_null(want, "%s@%s is in neither libc nor ld.so", e.name, e.version);
    uintptr_t got = real::find(e.name, e.scope, e.version);
    if (e.scope == real::Scope::AnyTls) got += arch::get_tp();
    cr_expect_eq(got, (uintptr_t)want, "%s@%s", e.name, e.version);
    n++;
  }
  cr_expect_geq(n, 6);
}

// A symbol with several versions: unversioned lookups take the default
// one (@@), a versioned lookup the one it names, hidden or not.
Test(real, default_and_hidden_versions) {
#if defined(__aarch64__)
  // aarch64's glibc starts at 2.17: pthread_cond_init has one version
  // there; glob has two (the hidden GLIBC_2.17, the default GLIBC_2.27).
  const char *sym = "glob", *defver = "GLIBC_2.27", *oldver = "GLIBC_2.17";
  const char* spawnver = "GLIBC_2.17";
#else
  const char *sym = "pthread_cond_init", *defver = "GLIBC_2.3.2", *oldver = "GLIBC_2.2.5";
  const char* spawnver = "GLIBC_2.15";
#endif
  void* def = dlvsym(RTLD_NEXT, sym, defver);
  void* old = dlvsym(RTLD_NEXT, sym, oldver);
  cr_assert(def && old && def != old);
  real::resolve();
  cr_expect_eq((void*)real::find(sym, real::Scope::Next, nullptr), def);
  cr_expect_eq((void*)real::pthread_cond_init, dlvsym(RTLD_NEXT, "pthread_cond_init",
#if defined(__aarch64__)
                                                      "GLIBC_2.17"));
#else
                                                      "GLIBC_2.3.2"));
#endif
  cr_expect_eq((void*)real::find(sym, real::Scope::Next, oldver), old);
  cr_expect_eq(real::find(sym, real::Scope::Next, "GLIBC_9.99"), 0u);
  // posix_spawn@GLIBC_2.2.5 is a compat version with other semantics; a
  // program binds to posix_spawn@@GLIBC_2.15 (dlsym(RTLD_NEXT) of glibc
  // before 2.36 gave the old one).
#ifndef __SANITIZE_ADDRESS__  // AddressSanitizer's own posix_spawn comes first
  void* spawn = dlvsym(RTLD_NEXT, "posix_spawn", spawnver);
  cr_assert_not_null(spawn);
  cr_expect_eq((void*)real::posix_spawn, spawn);
#endif
  cr_expect_eq(real::find("goshim_no_such_symbol", real::Scope::Any, nullptr), 0u);
  // Next skips this executable's own definitions; Any does not.
  cr_expect_eq((void*)real::find("calloc", real::Scope::Next, nullptr), dlsym(RTLD_NEXT, "calloc"));
  cr_expect_eq((void*)real::find("calloc", real::Scope::Any, nullptr), dlsym(RTLD_DEFAULT, "calloc"));
}

Test(real, resolution_allocates_nothing) {
#ifdef __SANITIZE_ADDRESS__
  cr_skip_test("the allocator belongs to AddressSanitizer");
#else
  counting = true;
  allocations = 0;
  real::resolve();
  uintptr_t v = real::find("_thread_db_pthread_specific", real::Scope::Any, "GLIBC_PRIVATE");
  (void)v;
  void* p = malloc(16);  // the counter counts
  counting = false;
  free(p);
  cr_expect_eq(allocations, 1, "%d allocations", allocations);
#endif
}

namespace {
void* lazy_thread(void*) { return (void*)real::lazy::sigaction(); }
}  // namespace

// Lazy use before resolve(), from a thread other than the first.
Test(real, lazy_before_resolve_from_another_thread) {
  cr_assert(!real::resolved());
  pthread_t th;
  cr_assert_eq(pthread_create(&th, nullptr, lazy_thread, nullptr), 0);
  void* r = nullptr;
  pthread_join(th, &r);
  cr_expect_eq(r, dlsym(RTLD_DEFAULT, "sigaction"));
  cr_expect(real::resolved());
  cr_expect_eq((void*)real::lazy::fork(), dlsym(RTLD_DEFAULT, "fork"));
}
