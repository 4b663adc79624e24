// Configuration from the environment, read once at start-up.
//
//   GOSHIM_MAXPROCS=N      number of Ps (default: CPUs in the affinity mask,
//                          capped by the cgroup v1/v2 CPU quota)
//   GOSHIM_STACK=SIZE      default goroutine stack size (e.g. 256k, 8m)
//   GOSHIM_MODE=M:N|1:1    1:1 leaves every thread a kernel thread
//   GOSHIM_PREEMPT=off|SIGNAL   async preemption signal (default SIGURG)
//   GOSHIM_TRACE=FILE      scheduler trace (Chrome trace-event JSON)
//   GOSHIM_DEBUG=k=v,...   schedtrace=MS, scheddetail=1, stats=1,
//                          deadlock=0|1|fatal, pinned=MS, dumpsignal=SIG
//
// A bad value is reported once on stderr and the default is used.
#pragma once

#include <stddef.h>

namespace goshim {

struct Config {
  int maxprocs = 0;        // 0 until config_init
  size_t stack_size = 0;   // 0: glibc's default
  bool one_to_one = false;
  int preempt_signal = 0;  // 0: off
  const char* trace_file = nullptr;
  int schedtrace_ms = 0;
  bool scheddetail = false;
  bool stats = false;
  int deadlock = 1;        // 0 off, 1 report once and keep waiting, 2 report and exit(2)
  int pinned_ms = 0;
  int dump_signal = 0;
  // How long the end of the process waits for the shared-word watchers to
  // pass on what they hold before it does it itself (sharedwatch.cpp).
  int quiesce_ms = 1000;
};

extern Config config;

// Parses the environment. On the initial thread, before the runtime starts.
void config_init();

// CPUs goshim would use by default: the CPUs in the affinity mask, capped
// by the cgroup CPU quota (v2 cpu.max or v1 cpu.cfs_quota_us, the tightest
// on the way up to the root).
int default_procs();

// CPUs in the calling thread's affinity mask (at least 1). Any thread.
int affinity_cpus();

// The cgroup CPU quota in CPUs (rounded up), 0 when unlimited or unknown.
// PROC_CGROUP is the /proc/self/cgroup text's path, ROOT the cgroup
// filesystem's mount point (a test passes fake ones).
int cgroup_cpus_at(const char* proc_cgroup, const char* root);


}  // namespace goshim
