// Environment configuration (see config.hpp).
#include "core/config.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/gmp.hpp"
#include "core/rawlog.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

Config config;

namespace {

bool parse_int(const char* s, long lo, long hi, long* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (*end != 0 || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Reads a small text file into buf; returns its length or -1.
long read_file(const char* path, char* buf, size_t size) {
  long fd = sys::openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return -1;
  long n = sys::read((int)fd, buf, size - 1);
  sys::close((int)fd);
  if (n < 0) return -1;
  buf[n] = 0;
  return n;
}

// cgroup v2 quota: ceil(quota / period) CPUs, or 0 when unlimited/unknown.
int cgroup_cpus() {
  char cg[512];
  if (read_file("/proc/self/cgroup", cg, sizeof cg) <= 0) return 0;
  const char* p = strstr(cg, "0::");
  if (!p) return 0;
  p += 3;
  char rel[400];
  size_t n = 0;
  while (p[n] && p[n] != '\n' && n + 1 < sizeof rel) {
    rel[n] = p[n];
    n++;
  }
  rel[n] = 0;
  // Walk from the process's cgroup up to the root; the tightest quota wins.
  int best = 0;
  for (;;) {
    char path[512];
    rawfmt(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", strcmp(rel, "/") == 0 ? "" : rel);
    char buf[64];
    if (read_file(path, buf, sizeof buf) > 0 && strncmp(buf, "max", 3) != 0) {
      char* end = nullptr;
      long quota = strtol(buf, &end, 10);
      long period = end ? strtol(end, nullptr, 10) : 0;
      if (quota > 0 && period > 0) {
        int cpus = (int)((quota + period - 1) / period);
        if (best == 0 || cpus < best) best = cpus;
      }
    }
    char* slash = strrchr(rel, '/');
    if (!slash || slash == rel) {
      if (strcmp(rel, "/") == 0) break;
      strcpy(rel, "/");
      continue;
    }
    *slash = 0;
  }
  return best;
}

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
      ok = parse_int(val, 1, 3600000, &v);
      if (ok) config.schedtrace_ms = (int)v;
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
      ok = parse_int(val, 1, 3600000, &v);
      if (ok) config.pinned_ms = (int)v;
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

bool parse_size(const char* s, size_t* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return false;
  unsigned long long mul = 1;
  if (*end == 'k' || *end == 'K') mul = 1024, end++;
  else if (*end == 'm' || *end == 'M') mul = 1024 * 1024, end++;
  else if (*end == 'g' || *end == 'G') mul = 1024ull * 1024 * 1024, end++;
  if (*end == 'b' || *end == 'B') end++;
  if (*end != 0 || v == 0 || v > (1ull << 40) / mul) return false;
  *out = (size_t)(v * mul);
  return true;
}

int default_procs() {
  cpu_set_t set;
  int n = 0;
  long r = sys::sched_getaffinity(0, sizeof set, &set);
  if (r > 0) n = CPU_COUNT(&set);
  if (n <= 0) n = 1;
  int cg = cgroup_cpus();
  if (cg > 0 && cg < n) n = cg;
  if (n > kMaxProcs) n = kMaxProcs;
  return n;
}

void config_init() {
  const char* s;
  config.maxprocs = default_procs();
  if ((s = getenv("GOSHIM_MAXPROCS")) && *s) {
    long v;
    if (parse_int(s, 1, kMaxProcs, &v))
      config.maxprocs = (int)v;
    else
      rawlog("goshim: GOSHIM_MAXPROCS=%s is not a number in 1..%d; using %d\n", s, kMaxProcs,
             config.maxprocs);
  }
  if ((s = getenv("GOSHIM_STACK")) && *s) {
    size_t v;
    if (parse_size(s, &v) && v >= 16384)
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
