// Environment configuration (see config.hpp).
#include "core/config.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/gmp.hpp"
#include "core/numparse.hpp"
#include "core/privfd.hpp"
#include "core/rawlog.hpp"
#include "core/size.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

Config config;

namespace {

// Reads a small text file into buf; returns its length or -1.
long read_file(const char* path, char* buf, size_t size) {
  long n = privfd_read(path, buf, size);
  return n < 0 ? -1 : n;
}

// Reads "quota period" style numbers: the quota's CPUs rounded up, 0 when
// unlimited ("max", -1) or unreadable.
int quota_cpus(long quota, long period) {
  if (quota <= 0 || period <= 0) return 0;
  long cpus = (quota + period - 1) / period;
  return cpus > kMaxProcs ? kMaxProcs : (int)cpus;
}

// v2: DIR/cpu.max holds "max PERIOD" or "QUOTA PERIOD".
int v2_cpus(const char* dir) {
  char path[600], buf[64];
  rawfmt(path, sizeof path, "%s/cpu.max", dir);
  if (read_file(path, buf, sizeof buf) <= 0 || strncmp(buf, "max", 3) == 0) return 0;
  char* end = nullptr;
  long quota = strtol(buf, &end, 10);
  long period = end && end != buf ? strtol(end, nullptr, 10) : 0;
  return quota_cpus(quota, period);
}

// v1: DIR/cpu.cfs_quota_us (-1: unlimited) and DIR/cpu.cfs_period_us.
int v1_cpus(const char* dir) {
  char path[600], buf[64];
  rawfmt(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
  if (read_file(path, buf, sizeof buf) <= 0) return 0;
  long quota = strtol(buf, nullptr, 10);
  rawfmt(path, sizeof path, "%s/cpu.cfs_period_us", dir);
  if (read_file(path, buf, sizeof buf) <= 0) return 0;
  return quota_cpus(quota, strtol(buf, nullptr, 10));
}

// The tightest quota on the way from BASE/REL up to BASE.
int walk_up(const char* base, const char* rel_in, bool v2) {
  char rel[400];
  rawfmt(rel, sizeof rel, "%s", rel_in);
  int best = 0;
  for (;;) {
    char dir[520];
    rawfmt(dir, sizeof dir, "%s%s", base, strcmp(rel, "/") == 0 ? "" : rel);
    int cpus = v2 ? v2_cpus(dir) : v1_cpus(dir);
    if (cpus > 0 && (best == 0 || cpus < best)) best = cpus;
    if (strcmp(rel, "/") == 0 || rel[0] != '/') break;
    char* slash = strrchr(rel, '/');
    if (slash == rel)
      rel[1] = 0;
    else
      *slash = 0;
  }
  return best;
}

// Whether the comma-separated controller list names "cpu".
bool has_cpu_controller(const char* list, size_t len) {
  size_t i = 0;
  while (i < len) {
    size_t j = i;
    while (j < len && list[j] != ',') j++;
    if (j - i == 3 && strncmp(list + i, "cpu", 3) == 0) return true;
    i = j + 1;
  }
  return false;
}

}  // namespace

int cgroup_cpus_at(const char* proc_cgroup, const char* root) {
  char cg[4096];
  if (read_file(proc_cgroup, cg, sizeof cg) <= 0) return 0;
  int best = 0;
  // Each line: "ID:CONTROLLERS:PATH"; v2's is "0::PATH".
  for (char* line = cg; line && *line;) {
    char* nl = strchr(line, '\n');
    if (nl) *nl = 0;
    char* c1 = strchr(line, ':');
    char* c2 = c1 ? strchr(c1 + 1, ':') : nullptr;
    if (c2 && c2[1] == '/') {
      const char* rel = c2 + 1;
      int cpus = 0;
      char base[300];
      if (c2 == c1 + 1) {  // v2 (unified)
        rawfmt(base, sizeof base, "%s", root);
        cpus = walk_up(base, rel, true);
        if (!cpus) {  // hybrid layout: the unified tree under ROOT/unified
          rawfmt(base, sizeof base, "%s/unified", root);
          cpus = walk_up(base, rel, true);
        }
      } else if (has_cpu_controller(c1 + 1, (size_t)(c2 - c1 - 1))) {  // v1
        *c2 = 0;  // rawfmt has no precision: cut the controller list
        rawfmt(base, sizeof base, "%s/%s", root, c1 + 1);
        *c2 = ':';
        cpus = walk_up(base, rel, false);
        if (!cpus) {
          rawfmt(base, sizeof base, "%s/cpu", root);
          cpus = walk_up(base, rel, false);
        }
      }
      if (cpus > 0 && (best == 0 || cpus < best)) best = cpus;
    }
    line = nl ? nl + 1 : nullptr;
  }
  return best;
}

int affinity_cpus() {
  // The kernel writes only the bytes of its own mask size and returns that
  // count; the rest of the set must not be counted.
  cpu_set_t set;
  CPU_ZERO(&set);
  long r = sys::sched_getaffinity(0, sizeof set, &set);
  if (r <= 0) return 1;
  int n = CPU_COUNT_S((size_t)r, &set);
  return n > 0 ? n : 1;
}

namespace {

int parse_signal(const char* s) {
  if (!s) return -1;
  if (strncmp(s, "SIG", 3) == 0) s += 3;
  static const struct {
    const char* name;
    int sig;
  } names[] = {{"URG", SIGURG},   {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"QUIT", SIGQUIT},
               {"PWR", SIGPWR},   {"WINCH", SIGWINCH}, {"PROF", SIGPROF}, {"VTALRM", SIGVTALRM},
               {"HUP", SIGHUP},   {"TRAP", SIGTRAP}};
  for (auto& n : names)
    if (strcmp(s, n.name) == 0) return n.sig;
  long v;
  if (parse_int(s, 1, 64, &v)) return (int)v;
  if (strncmp(s, "RTMIN+", 6) == 0 && parse_int(s + 6, 0, 30, &v)) return SIGRTMIN + (int)v;
  return -1;
}

void parse_debug(const char* s) {
  char buf[256];
  size_t len = strlen(s);
  if (len >= sizeof buf) len = sizeof buf - 1;
  memcpy(buf, s, len);
  buf[len] = 0;
  for (char* tok = buf; tok && *tok;) {
    char* comma = strchr(tok, ',');
    if (comma) *comma = 0;
    char* eq = strchr(tok, '=');
    const char* val = eq ? eq + 1 : "1";
    if (eq) *eq = 0;
    long v = 0;
    bool ok = true;
    if (strcmp(tok, "schedtrace") == 0) {
      int ms;
      ok = parse_schedtrace_ms(val, &ms);
      if (ok) config.schedtrace_ms = ms;
    } else if (strcmp(tok, "scheddetail") == 0) {
      ok = parse_int(val, 0, 1, &v);
      if (ok) config.scheddetail = v;
    } else if (strcmp(tok, "stats") == 0) {
      ok = parse_int(val, 0, 1, &v);
      if (ok) config.stats = v;
    } else if (strcmp(tok, "deadlock") == 0) {
      ok = strcmp(val, "fatal") == 0 ? (v = 2, true) : parse_int(val, 0, 2, &v);
      if (ok) config.deadlock = (int)v;
    } else if (strcmp(tok, "pinned") == 0) {
      ok = parse_int(val, 1, kMaxDebugMs, &v);
      if (ok) config.pinned_ms = (int)v;
    } else if (strcmp(tok, "quiesce") == 0) {
      ok = parse_int(val, 0, kMaxDebugMs, &v);
      if (ok) config.quiesce_ms = (int)v;
    } else if (strcmp(tok, "dumpsignal") == 0) {
      int sig = parse_signal(val);
      ok = sig > 0;
      if (ok) config.dump_signal = sig;
    } else {
      rawlog("goshim: GOSHIM_DEBUG: unknown setting '%s' ignored\n", tok);
    }
    if (!ok) rawlog("goshim: GOSHIM_DEBUG: bad value '%s' for %s ignored\n", val, tok);
    tok = comma ? comma + 1 : nullptr;
  }
}

}  // namespace


int default_procs() {
  int n = affinity_cpus();
  int cg = cgroup_cpus_at("/proc/self/cgroup", "/sys/fs/cgroup");
  if (cg > 0 && cg < n) n = cg;
  if (n > kMaxProcs) n = kMaxProcs;
  return n;
}

void config_init() {
  const char* s;
  config.maxprocs = default_procs();
  if ((s = getenv("GOSHIM_MAXPROCS")) && *s) {
    int v;
    if (parse_procs(s, &v))
      config.maxprocs = v;
    else
      rawlog("goshim: GOSHIM_MAXPROCS=%s is not a number in 1..%d; using %d\n", s, kMaxProcs,
             config.maxprocs);
  }
  if ((s = getenv("GOSHIM_STACK")) && *s) {
    size_t v;
    if (parse_stack_size(s, &v))
      config.stack_size = v;
    else
      rawlog("goshim: GOSHIM_STACK=%s is not a size of at least 16k; using the default\n", s);
  }
  if ((s = getenv("GOSHIM_MODE")) && *s) {
    if (strcmp(s, "1:1") == 0)
      config.one_to_one = true;
    else if (strcmp(s, "M:N") != 0 && strcmp(s, "m:n") != 0)
      rawlog("goshim: GOSHIM_MODE=%s: expected M:N or 1:1; using M:N\n", s);
  }
  config.preempt_signal = SIGURG;
  if ((s = getenv("GOSHIM_PREEMPT")) && *s) {
    if (strcmp(s, "off") == 0) {
      config.preempt_signal = 0;
    } else {
      int sig = parse_signal(s);
      if (sig > 0 && sig != SIGKILL && sig != SIGSTOP && sig != SIGSEGV && sig != SIGBUS)
        config.preempt_signal = sig;
      else
        rawlog("goshim: GOSHIM_PREEMPT=%s: expected off or a signal; using SIGURG\n", s);
    }
  }
  if ((s = getenv("GOSHIM_TRACE")) && *s) config.trace_file = s;
  if ((s = getenv("GOSHIM_DEBUG")) && *s) parse_debug(s);
}

}  // namespace goshim
