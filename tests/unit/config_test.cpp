// The default processor count: the affinity mask (only the bytes the kernel
// fills are counted) capped by the cgroup CPU quota, read from fake cgroup
// trees (v2, v1, hybrid, nested quotas, unlimited).
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.hpp"

using namespace goshim;

namespace {

char root[256];

void put(const char* rel, const char* text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  // mkdir -p of the parent
  for (char* p = path + strlen(root) + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(path, 0755);
    *p = '/';
  }
  FILE* f = fopen(path, "w");
  cr_assert(f, "fopen %s", path);
  fputs(text, f);
  fclose(f);
}

int quota(const char* proc_cgroup_text) {
  put("proc_cgroup", proc_cgroup_text);
  char pc[512], fs[512];
  snprintf(pc, sizeof pc, "%s/proc_cgroup", root);
  snprintf(fs, sizeof fs, "%s/fs", root);
  return cgroup_cpus_at(pc, fs);
}

void setup() {
  snprintf(root, sizeof root, "/tmp/goshim-config-test.XXXXXX");
  cr_assert(mkdtemp(root));
}

void teardown() {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  cr_assert(system(cmd) == 0);
}

// Leaves set bits in the stack below the caller's frame.
__attribute__((noinline)) void dirty_stack() {
  volatile unsigned char junk[8192];
  memset((void*)junk, 0xff, sizeof junk);
  __asm__ volatile("" ::"r"(junk) : "memory");
}

}  // namespace

TestSuite(config, .init = setup, .fini = teardown);

Test(config, affinity_counts_only_the_kernels_bytes) {
  // glibc's sched_getaffinity zeroes the bytes past the kernel's mask.
  cpu_set_t set;
  cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
  cr_assert_eq(affinity_cpus(), CPU_COUNT(&set));
  // With one CPU allowed the count is 1 whatever was on the stack before.
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) {
      CPU_SET(c, &one);
      break;
    }
  cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
  dirty_stack();  // the frame affinity_cpus gets next is full of 1 bits
  cr_expect_eq(affinity_cpus(), 1);
  cr_assert_eq(sched_setaffinity(0, sizeof set, &set), 0);
}

Test(config, v2_quota_rounds_up) {
  put("fs/app/cpu.max", "150000 100000\n");
  cr_expect_eq(quota("0::/app\n"), 2);
}

Test(config, v2_unlimited_and_missing) {
  put("fs/app/cpu.max", "max 100000\n");
  cr_expect_eq(quota("0::/app\n"), 0);
  cr_expect_eq(quota("0::/nowhere\n"), 0);
}

Test(config, v2_tightest_on_the_way_up) {
  put("fs/a/cpu.max", "100000 100000\n");
  put("fs/a/b/cpu.max", "max 100000\n");
  put("fs/a/b/c/cpu.max", "300000 100000\n");
  cr_expect_eq(quota("0::/a/b/c\n"), 1);
}

Test(config, v1_cpu_controller) {
  put("fs/cpu,cpuacct/svc/cpu.cfs_quota_us", "250000\n");
  put("fs/cpu,cpuacct/svc/cpu.cfs_period_us", "100000\n");
  cr_expect_eq(quota("4:memory:/svc\n2:cpu,cpuacct:/svc\n1:name=systemd:/svc\n"), 3);
}

Test(config, v1_unlimited) {
  put("fs/cpu/svc/cpu.cfs_quota_us", "-1\n");
  put("fs/cpu/svc/cpu.cfs_period_us", "100000\n");
  cr_expect_eq(quota("2:cpu:/svc\n"), 0);
}

Test(config, v1_cpuset_is_not_cpu) {
  put("fs/cpuset/svc/cpu.cfs_quota_us", "100000\n");
  put("fs/cpuset/svc/cpu.cfs_period_us", "100000\n");
  cr_expect_eq(quota("3:cpuset:/svc\n"), 0);
}

Test(config, hybrid_unified_tree) {
  put("fs/unified/job/cpu.max", "50000 100000\n");
  cr_expect_eq(quota("1:cpu:/\n0::/job\n"), 1);
}

Test(config, garbage_is_no_quota) {
  put("fs/x/cpu.max", "lots\n");
  cr_expect_eq(quota("0::/x\n"), 0);
  cr_expect_eq(quota("nonsense"), 0);
  cr_expect_eq(quota(""), 0);
}
