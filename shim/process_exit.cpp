// The ends of a process: _exit, _Exit, and exit's last step.
//
// A watcher thread of core/sharedwatch relays kernel wakes of
// process-shared words to goroutines; a wake it took and has not passed on
// would die with the process. So before the process ends, the watchers
// are quiesced (watch_quiesce: they pass on what they may hold). exit()
// reaches glibc's _exit by an internal call that no preload can see; it
// runs the destructors of the loaded objects first, goshim's among the
// last of them, which is where it quiesces. exec does the same
// (shim/exec.cpp), and syscall(SYS_exit_group). A process killed by a
// signal cannot: a wake its watcher holds at that instant is lost, as one
// its thread was woken with natively would be.
#include <unistd.h>

#include "core/sharedwatch.hpp"
#include "shim/shim.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

// glibc's _exit is the exit_group system call and nothing else.
GOSHIM_EXPORT void _exit(int status) {
  watch_quiesce();
  sys::exit_group(status);
}

GOSHIM_EXPORT void _Exit(int status) {
  watch_quiesce();
  sys::exit_group(status);
}

// syscall(SYS_exit_group, status) (arch/<arch>/syscall.S).
extern "C" __attribute__((visibility("hidden"))) long goshim_syscall_exit(long, long status, long,
                                                                         long, long, long, long) {
  watch_quiesce();
  sys::exit_group((int)status);
}

namespace {
__attribute__((destructor)) void quiesce_at_exit() { watch_quiesce(); }
}  // namespace
