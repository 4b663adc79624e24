// The rest of the pthread_t family: names, CPU clock, affinity, scheduling
// parameters, and yielding. For a goroutine these are recorded in its G
// (there is no kernel thread to apply them to) after glibc's validation; for
// a foreign kernel thread they go to glibc.
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/cputime.hpp"
#include "core/proc.hpp"
#include "core/sched.hpp"
#include "shim/shim.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

bool ours(pthread_t t) { return mn_active() && is_goshim_tp(t); }

int check_policy_prio(int policy, int prio) {
  switch (policy) {
    case SCHED_OTHER:
    case SCHED_BATCH:
    case SCHED_IDLE:
      return prio == 0 ? 0 : EINVAL;
    case SCHED_FIFO:
    case SCHED_RR: {
      if (prio < sched_get_priority_min(policy) || prio > sched_get_priority_max(policy))
        return EINVAL;
      if (geteuid() != 0) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_RTPRIO, &rl) != 0 || rl.rlim_cur < (rlim_t)prio) return EPERM;
      }
      return 0;
    }
    default:
      return EINVAL;
  }
}

}  // namespace

GOSHIM_EXPORT int pthread_setname_np(pthread_t t, const char* name) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_setname_np(t, name);
  }
  size_t n = strlen(name);
  if (n >= 16) return ERANGE;
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  memcpy(gp->name, name, n + 1);
  return 0;
}

GOSHIM_EXPORT int pthread_getname_np(pthread_t t, char* buf, size_t len) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_getname_np(t, buf, len);
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  const char* name = gp->name;
  char comm[16];
  if (!name[0]) {
    // Never named: like a new kernel thread, it carries the process name.
    long fd = sys::openat(-100, "/proc/self/comm", 0, 0);
    long n = fd >= 0 ? sys::read((int)fd, comm, sizeof comm - 1) : -1;
    if (fd >= 0) sys::close((int)fd);
    if (n < 0) n = 0;
    if (n > 0 && comm[n - 1] == '\n') n--;
    comm[n] = 0;
    name = comm;
  }
  size_t n = strlen(name);
  if (len < n + 1) return ERANGE;
  memcpy(buf, name, n + 1);
  return 0;
}

GOSHIM_EXPORT int pthread_getcpuclockid(pthread_t t, clockid_t* clk) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_getcpuclockid(t, clk);
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  // The goroutine's own CPU clock, as glibc encodes a thread's
  // (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)) with its virtual tid;
  // clock_gettime serves it (shim/cpuclock.cpp). Asking starts the
  // accounting (core/cputime.hpp).
  cputime_enable(shim::user_g());
  *clk = (clockid_t)((~(unsigned)gp->vtid << 3) | 6);
  return 0;
}

GOSHIM_EXPORT int pthread_setaffinity_np(pthread_t t, size_t size, const cpu_set_t* set) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_setaffinity_np(t, size, set);
  }
  if (!g_from_pthread(t)) return ESRCH;
  // The kernel's validation: at least one allowed CPU in the set.
  cpu_set_t allowed;
  long r = sys::sched_getaffinity(0, sizeof allowed, &allowed);
  if (r < 0) return (int)-r;
  bool any = false;
  for (size_t i = 0; i < size && i < sizeof allowed; i++)
    if (((const unsigned char*)set)[i] & ((const unsigned char*)&allowed)[i]) any = true;
  return any ? 0 : EINVAL;  // accepted; goroutines run on any M
}

GOSHIM_EXPORT int pthread_getaffinity_np(pthread_t t, size_t size, cpu_set_t* set) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_getaffinity_np(t, size, set);
  }
  if (!g_from_pthread(t)) return ESRCH;
  long r = sys::sched_getaffinity(0, size, set);
  if (r < 0) return (int)-r;
  if ((size_t)r < size) memset((char*)set + r, 0, size - r);
  return 0;
}

GOSHIM_EXPORT int pthread_setschedparam(pthread_t t, int policy, const struct sched_param* p) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_setschedparam(t, policy, p);
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  int r = check_policy_prio(policy & ~SCHED_RESET_ON_FORK, p->sched_priority);
  if (r) return r;
  gp->sched_policy = policy & ~SCHED_RESET_ON_FORK;
  gp->sched_priority = p->sched_priority;
  return 0;
}

GOSHIM_EXPORT int pthread_getschedparam(pthread_t t, int* policy, struct sched_param* p) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_getschedparam(t, policy, p);
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  *policy = gp->sched_policy;
  memset(p, 0, sizeof *p);
  p->sched_priority = gp->sched_priority;
  return 0;
}

GOSHIM_EXPORT int pthread_setschedprio(pthread_t t, int prio) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_setschedprio(t, prio);
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  int r = check_policy_prio(gp->sched_policy, prio);
  if (r) return r;
  gp->sched_priority = prio;
  return 0;
}

GOSHIM_EXPORT int sched_yield(void) {
  if (shim::user_g()) {
    gosched();
    return 0;
  }
  shim::ensure_real();
  return real::sched_yield();
}

// <pthread.h> redirects pthread_yield to sched_yield; define the symbol
// under its own name for binaries linked against the old one.
GOSHIM_EXPORT int goshim_pthread_yield(void) __asm__("pthread_yield");
int goshim_pthread_yield(void) { return sched_yield(); }

namespace {
std::atomic<int> concurrency{0};
}

GOSHIM_EXPORT int pthread_setconcurrency(int level) {
  if (level < 0) return EINVAL;
  concurrency.store(level, std::memory_order_relaxed);  // a hint, as in glibc
  return 0;
}

GOSHIM_EXPORT int pthread_getconcurrency(void) {
  return concurrency.load(std::memory_order_relaxed);
}
