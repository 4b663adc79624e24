// Goroutine stacks (DESIGN.md decision 3).
//
// A stack is an anonymous MAP_NORESERVE mapping, so only touched pages cost
// memory, with a guard at its low end installed by MADV_GUARD_INSTALL
// (Linux 6.13+: no VMA split, so vm.max_map_count does not cap the number of
// goroutines) or by mprotect(PROT_NONE) on older kernels. Freed stacks are
// recycled: a small per-P cache for the default size, global lists per
// (size, guard) class otherwise, holding at most 256 stacks (glibc's
// cache holds 40 MiB of them). A thread's end gives its stack's unused
// pages back (stack_release_unused), as glibc does.
#pragma once

#include <stddef.h>

#include "core/gmp.hpp"

namespace goshim {

// Reads the page size and the default stack size. Once, at init.
void stack_init();
size_t page_size();
// The stack size a thread gets without pthread_attr_setstacksize: glibc's
// default (RLIMIT_STACK, or pthread_setattr_default_np), or GOSHIM_STACK.
size_t default_stack_size();
void set_default_stack_size(size_t size);
size_t default_guard_size();

// Allocates a stack of `size` usable bytes with a guard of `guard` bytes
// (both rounded up to pages). pp: the caller's P for the cache, or null.
// Returns false when the memory cannot be had (the caller reports EAGAIN).
bool stack_alloc(P* pp, size_t size, size_t guard, Stack* out);
// Returns a stack to the pools. pp as above.
void stack_free(P* pp, const Stack& s);

// At a thread's end, as glibc's start_thread (advise_stack_range): the
// pages of s below the exiting frame sp, less arch::kGlibcStackMin kept
// warm below it, go back to the kernel, so that an exited goroutine costs
// no more resident memory than an exited kernel thread (a deep recursion's
// pages stayed resident on the free lists and pools: issue 12). Not for a
// program's own stack (pthread_attr_setstack: glibc leaves it alone). Any
// thread; s must not be in use.
void stack_release_unused(const Stack& s, uintptr_t sp);

// In a fork child: forget the pooled stacks (fork.hpp).
void stack_after_fork();

// sysmon: returns the pages of stacks that have sat in the global pool for
// a while to the kernel (DESIGN.md decision 3). Without P, no locks held.
void stack_scavenge(int64_t now);

// Whether guards use MADV_GUARD_INSTALL (true) or mprotect (false).
bool stack_guard_is_madvise();
// Whether sys::process_madvise_self installs guards (MADV_GUARD_INSTALL,
// checked as stack guards are) and so can prepare many ranges in one call.
bool madvise_batch_works();

}  // namespace goshim
