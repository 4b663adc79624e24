// Whether a futex word may be shared with another process: the per-address
// decision behind syscall(SYS_futex) operations without FUTEX_PRIVATE_FLAG
// (libstdc++ 12 issues those for memory that is almost always private).
//
// A word is shared when its mapping is MAP_SHARED (VM_MAYSHARE: shm,
// memfd, shared file and anonymous mappings) and private otherwise; the
// kernel keys such futexes the same way. The answer comes from
// PROCMAP_QUERY on /proc/self/maps (Linux 6.11+; a scan of the maps file
// on older kernels), cached per mapping in a small table. A cached answer
// is valid until a shared mapping may have appeared (the mmap family
// goshim interposes, syscall(SYS_mmap...), sem_open), which invalidates
// the whole table: so a private answer is never stale. A shared answer may
// be (the shared mapping was replaced by a private one): the word then
// keeps going to the kernel, which is correct, just slower.
//
// Not seen: shared mappings that replace a range classified private
// through raw mmap system calls (inline assembly) or glibc-internal mmap
// calls other than sem_open's.
#pragma once

#include <stdint.h>

namespace goshim {

// True if addr may be shared with another process (when in doubt: true).
// Any thread; a system call on a cache miss.
bool memclass_shared(const void* addr);

// Opens goshim's own /proc/self/maps (runtime init, before any program
// thread; again in a fork child). Until then a cache miss opens the file
// on the privfd thread.
void memclass_init();

// A shared mapping may have been created: forget every cached answer.
// Any thread, signal-safe.
void memclass_mapping_changed();

// Tests: answer through the /proc/self/maps scan (the path for kernels
// without PROCMAP_QUERY) instead of the ioctl.
void memclass_use_scan(bool on);

}  // namespace goshim
