// dlopen/dlmopen: a module with initial-exec TLS loaded after goroutines
// exist gets its TLS image copied into every goroutine's block (glibc only
// initializes the blocks of the kernel threads it knows about).
//
// With the GLRO(dl_open) hook in place (core/dlhook.cpp) every dlopen, the
// program's and libc's own, comes back through the hook, and these
// interposers only pass the call on. Without it they do the bookkeeping,
// for the program's own calls.
//
// glibc runs the new modules' constructors inside dlopen, after it set up
// their TLS; a constructor that calls a cancellation point with the
// caller's cancellation pending unwinds the caller out of dlopen, the
// modules staying loaded. The bookkeeping then runs on the way out too
// (tests/preload/dlopen_cancel_ctor).
#include <dlfcn.h>

#include "core/dlhook.hpp"
#include "shim/shim.hpp"
#include "syscalls/blocking.hpp"

using namespace goshim;

namespace {

struct OpenArgs {
  Lmid_t lmid;
  const char* file;
  int mode;
  bool m;  // dlmopen
};

long do_open(void* a) {
  auto* o = (OpenArgs*)a;
  return (long)(o->m ? real::dlmopen(o->lmid, o->file, o->mode) : real::dlopen(o->file, o->mode));
}

void* open_guarded(OpenArgs* o) {
  shim::ensure_real();
  if (dl_open_hooked()) return (void*)do_open(o);
  void* h = (void*)goshim_call_undo_on_unwind(do_open, o, dl_after_load, nullptr);
  if (h) dl_after_load(nullptr);
  return h;
}

}  // namespace

GOSHIM_EXPORT void* dlopen(const char* file, int mode) {
  OpenArgs o{0, file, mode, false};
  return open_guarded(&o);
}

GOSHIM_EXPORT void* dlmopen(Lmid_t lmid, const char* file, int mode) {
  OpenArgs o{lmid, file, mode, true};
  return open_guarded(&o);
}
