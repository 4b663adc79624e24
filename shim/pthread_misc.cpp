// The rest of the pthread_t family: names, CPU clock, affinity, scheduling
// parameters, and yielding. For a goroutine these are recorded in its G
// (there is no kernel thread to apply them to) after glibc's validation; for
// a foreign kernel thread they go to glibc.
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/cputime.hpp"
#include "core/pi.hpp"
#include "core/proc.hpp"
#include "core/rtlock.hpp"
#include "core/sched.hpp"
#include "core/tcb.hpp"
#include "shim/shim.hpp"
#include "shim/sync.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

bool ours(pthread_t t) { return mn_active() && is_goshim_tp(t); }

// The kernel's range check: EINVAL for an unknown policy or a priority
// outside its range.
int check_range(int policy, int prio) {
  switch (policy) {
    case SCHED_OTHER:
    case SCHED_BATCH:
    case SCHED_IDLE:
      return prio == 0 ? 0 : EINVAL;
    case SCHED_FIFO:
    case SCHED_RR:
      return prio < sched_get_priority_min(policy) || prio > sched_get_priority_max(policy)
                 ? EINVAL
                 : 0;
    default:
      return EINVAL;
  }
}

bool cap_sys_nice() {
  struct {
    uint32_t version;
    int pid;
  } hdr = {0x20080522, 0};  // _LINUX_CAPABILITY_VERSION_3
  struct {
    uint32_t effective, permitted, inheritable;
  } data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return geteuid() == 0;
  return data[0].effective & (1u << 23);  // CAP_SYS_NICE
}

// The kernel's privilege rule for a real-time policy on a thread that has
// none yet, when goshim cannot ask the kernel on that thread right away
// (another goroutine's request): CAP_SYS_NICE, or an RLIMIT_RTPRIO of at
// least prio.
int check_priv(int policy, int prio) {
  if (!rt_policy(policy) || cap_sys_nice()) return 0;
  struct rlimit rl;
  if (getrlimit(RLIMIT_RTPRIO, &rl) != 0 || rl.rlim_cur == 0 || rl.rlim_cur < (rlim_t)prio)
    return EPERM;
  return 0;
}

// The calling goroutine, when it may change its own policy: running M:N
// (shim::user_g) or bound to its M by a real-time policy.
G* sched_self() {
  G* g = tls_g;
  if (!g || g->is_g0() || !mn_active()) return nullptr;
  if (g->rt_locked) return g->insig ? nullptr : g;
  return shim::user_g();
}

// pthread_setschedparam/setschedprio on goroutine gp (policy without
// SCHED_RESET_ON_FORK in pol). Returns 0 or an errno value.
int set_sched(G* gp, int policy, int prio) {
  int pol = policy & ~SCHED_RESET_ON_FORK;
  int r = check_range(pol, prio);
  if (r) return r;
  if (gp == sched_self()) return rt_set_self(policy, prio);
  // Another goroutine.
  if (gp->rt_locked) {
    // Bound to its M: the kernel thread takes the new policy at once. A
    // non-real-time one leaves it bound (only the G itself can unbind).
    M* mp = gp->m;
    struct sched_param sp = {};
    sp.sched_priority = rt_policy(pol) ? (gp->rt_pp_max > prio ? gp->rt_pp_max : prio) : 0;
    long k = sys::sched_setscheduler(mp ? mp->tid : -1, rt_policy(pol) ? pol | SCHED_RESET_ON_FORK
                                                                         : SCHED_OTHER | SCHED_RESET_ON_FORK,
                                     &sp);
    if (k < 0) return (int)-k;
    gp->sched_policy = pol;
    gp->sched_priority = prio;
    return 0;
  }
  r = check_priv(pol, prio);
  if (r) return r;
  gp->sched_policy = pol;
  gp->sched_priority = prio;
  if (rt_policy(pol)) rt_request(gp);  // bound at its next call
  return 0;
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
  // clock_gettime serves it (shim/cpuclock.cpp).
  *clk = (clockid_t)((~(unsigned)gp->vtid << 3) | 6);
  return 0;
}

GOSHIM_EXPORT int pthread_setaffinity_np(pthread_t t, size_t size, const cpu_set_t* set) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_setaffinity_np(t, size, set);
  }
  if (!g_from_pthread(t)) return ESRCH;
  // Nothing is applied (goroutines run on any M), but the answer is the
  // kernel's, as glibc gets it for the thread: sched_setaffinity cuts the
  // set to the kernel's mask size (a shorter one is zero-extended), and
  // refuses with EINVAL a set naming no active CPU the cpuset allows,
  // whatever the thread's current mask (EFAULT for a bad pointer). So the
  // set is applied to the calling M's kernel thread and its mask put back:
  // by tid, and with no preemption in between (acquirem), so that it is
  // the same kernel thread whose mask was read. (Reading the M's mask into
  // an uninitialised set and testing 128 bytes of it against the program's
  // set accepted a nonexistent CPU when stack garbage lay past the
  // kernel's bytes, and refused a CPU outside the current mask.)
  unsigned long old[1024 / sizeof(unsigned long)];  // up to 8192 CPUs
  M* mp = acquirem();
  long tid = sys::gettid();
  long n = sys::sched_getaffinity(tid, sizeof old, old);
  long r = n > 0 ? sys::raw3(SYS_sched_setaffinity, tid, (long)size, (long)set) : n;
  if (n > 0 && r == 0) sys::raw3(SYS_sched_setaffinity, tid, n, (long)old);
  releasem(mp);
  return r < 0 ? (int)-r : 0;
}

GOSHIM_EXPORT int pthread_getaffinity_np(pthread_t t, size_t size, cpu_set_t* set) {
  if (!ours(t)) {
    shim::ensure_real();
    return real::pthread_getaffinity_np(t, size, set);
  }
  if (!g_from_pthread(t)) return ESRCH;
  // As glibc's: the size is cut to INT_MAX, and the bytes past the
  // kernel's mask are zeroed. The mask is the calling M's (7.6).
  long r = sys::sched_getaffinity(0, size < INT_MAX ? size : INT_MAX, set);
  if (r < 0) return (int)-r;
  if ((size_t)r < size) memset((char*)set + r, 0, size - r);
  return 0;
}

// A kernel thread that holds priority-protect mutexes (goshim's, so glibc
// does not know): raised to their highest ceiling again after glibc set
// the priority it asked for, which glibc records as its own.
static int foreign_sched_set(pthread_t t, int policy, int r) {
  if (r != 0) return r;
  pid_t tid = 0;
  int max = shim::foreign_pp_max(t, &tid);
  if (max <= 0 || tid <= 0) return 0;
  int own;
  struct sched_param sp;
  if (real::pthread_getschedparam(t, &own, &sp) != 0 || sp.sched_priority >= max) return 0;
  sp.sched_priority = max;
  long e = sys::sched_setscheduler(tid, policy, &sp);
  return e < 0 ? (int)-e : 0;
}

GOSHIM_EXPORT int pthread_setschedparam(pthread_t t, int policy, const struct sched_param* p) {
  if (!ours(t)) {
    shim::ensure_real();
    return foreign_sched_set(t, policy, real::pthread_setschedparam(t, policy, p));
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  return set_sched(gp, policy, p->sched_priority);
}

GOSHIM_EXPORT int pthread_getschedparam(pthread_t t, int* policy, struct sched_param* p) {
  if (!ours(t)) {
    // A kernel thread raised as a PI mutex owner: its own scheduling, as
    // natively (and glibc, which reads the kernel's the first time and
    // keeps it, never sees the raised one).
    size_t off = tcb::tid_off.load(std::memory_order_relaxed);
    pid_t tid = off ? __atomic_load_n((pid_t*)((uintptr_t)t + off), __ATOMIC_RELAXED) : 0;
    if (tid > 0 && pi_own_sched(tid, policy, p)) return 0;
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
    int r = real::pthread_setschedprio(t, prio);
    int policy;
    struct sched_param sp;
    if (r == 0 && real::pthread_getschedparam(t, &policy, &sp) == 0)
      r = foreign_sched_set(t, policy, 0);
    return r;
  }
  G* gp = g_from_pthread(t);
  if (!gp) return ESRCH;
  return set_sched(gp, gp->sched_policy, prio);
}

// sched_setscheduler and friends on the calling thread (pid 0, the tid of
// the M running it, or the process id from main) act on the goroutine;
// any other pid goes to the kernel (section 7.5 of LD_PRELOAD.md).
namespace {

G* sched_target(pid_t pid) {
  G* self = sched_self();
  if (!self) return nullptr;
  if (pid == 0 || (self->m && pid == self->m->tid)) return self;
  if (self->is_main() && pid == (pid_t)sys::getpid()) return self;
  return nullptr;
}

int fail(int e) {
  errno = e;
  return -1;
}

}  // namespace

GOSHIM_EXPORT int sched_setscheduler(pid_t pid, int policy, const struct sched_param* p) {
  if (G* self = sched_target(pid)) {
    if (!p) return fail(EINVAL);
    int r = set_sched(self, policy, p->sched_priority);
    return r ? fail(r) : 0;
  }
  long r = sys::sched_setscheduler(pid, policy, p);
  return r < 0 ? fail((int)-r) : (int)r;
}

GOSHIM_EXPORT int sched_setparam(pid_t pid, const struct sched_param* p) {
  if (G* self = sched_target(pid)) {
    if (!p) return fail(EINVAL);
    int r = set_sched(self, self->sched_policy, p->sched_priority);
    return r ? fail(r) : 0;
  }
  long r = syscall(SYS_sched_setparam, (long)pid, p);
  return (int)r;
}

GOSHIM_EXPORT int sched_getscheduler(pid_t pid) {
  G* self = sched_target(pid);
  if (self && !self->rt_locked) return self->sched_policy;
  // A bound G's kernel thread has its policy (with goshim's SCHED_RESET_ON_FORK).
  long r = sys::sched_getscheduler(self ? 0 : pid);
  if (self && r >= 0) r &= ~SCHED_RESET_ON_FORK;
  int pol;
  struct sched_param sp;
  // A kernel thread raised as a PI mutex owner: its own policy, as natively.
  if (!self && r >= 0 && pid >= 0 && pi_own_sched(pid ? pid : (pid_t)sys::gettid(), &pol, &sp))
    r = pol;
  return r < 0 ? fail((int)-r) : (int)r;
}

// syscall(SYS_sched_setattr, pid, attr, flags) (shim/syscall_io.cpp; glibc
// 2.36 has no wrapper) on the calling goroutine. The kernel applies the
// attributes to a kernel thread, which under M:N runs other goroutines
// too, and goshim's sched_getscheduler answers from the goroutine's record:
// stress-ng's schedpolicy stressor set SCHED_DEADLINE this way and read
// back the SCHED_BATCH it had set before with sched_setscheduler. So:
//   - SCHED_DEADLINE, SCHED_FIFO, SCHED_RR, or a goroutine bound to its
//     kernel thread already: the goroutine is bound to its kernel thread
//     for the rest of its life (rt_bind_kernel_thread, as an io_uring
//     ring's), the kernel applies the attributes there, and the policy is
//     recorded;
//   - SCHED_OTHER, SCHED_BATCH, SCHED_IDLE on an unbound goroutine: the
//     kernel checks and applies them on the M's kernel thread, whose own
//     attributes are then put back (the M runs other goroutines), and the
//     policy and priority are recorded, as sched_setscheduler does.
// Not the calling goroutine (another thread id, another process): the
// kernel, unchanged. Returns the kernel's convention (0 or -errno).
namespace {
struct SchedAttr {  // the kernel's struct sched_attr, SCHED_ATTR_SIZE_VER1
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime, sched_deadline, sched_period;
  uint32_t sched_util_min, sched_util_max;
};
#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif
constexpr uint64_t kSchedFlagKeepPolicy = 0x08;  // SCHED_FLAG_KEEP_POLICY
}  // namespace

long goshim_sched_setattr(long pid, long attr, long flags) {
  G* self = attr && pid >= 0 && flags == 0 ? sched_target((pid_t)pid) : nullptr;
  if (!self) return sys::raw3(SYS_sched_setattr, pid, attr, flags);
  const auto* a = (const SchedAttr*)attr;
  bool keep = a->sched_flags & kSchedFlagKeepPolicy;
  int pol = (int)a->sched_policy;
  int prio = (int)a->sched_priority;
  long r;
  if (self->rt_locked || (!keep && (pol == SCHED_DEADLINE || rt_policy(pol)))) {
    if (!self->rt_locked) rt_bind_kernel_thread(self);
    r = sys::raw3(SYS_sched_setattr, 0, attr, 0);
  } else {
    SchedAttr saved;
    memset(&saved, 0, sizeof saved);
    long g = sys::raw4(SYS_sched_getattr, 0, (long)&saved, sizeof saved, 0);
    r = sys::raw3(SYS_sched_setattr, 0, attr, 0);
    if (r == 0 && g == 0) {
      saved.size = sizeof saved;
      saved.sched_flags &= ~kSchedFlagKeepPolicy;
      sys::raw3(SYS_sched_setattr, 0, (long)&saved, 0);
    }
  }
  if (r == 0 && !keep) {
    self->sched_policy = pol;
    self->sched_priority = prio;
  }
  return r;
}

// syscall(SYS_sched_getattr, pid, attr, size, flags) on the calling
// goroutine: the kernel fills the structure (its checks, its size rules)
// from the goroutine's kernel thread; an unbound goroutine's policy and
// priority are its own record (the M's kernel thread keeps SCHED_OTHER),
// as sched_getscheduler answers.
long goshim_sched_getattr(long pid, long attr, long size, long flags) {
  long r = sys::raw4(SYS_sched_getattr, pid, attr, size, flags);
  if (r != 0 || pid < 0) return r;
  G* self = sched_target((pid_t)pid);
  if (!self || self->rt_locked) return r;
  auto* a = (SchedAttr*)attr;
  a->sched_policy = (uint32_t)self->sched_policy;
  a->sched_priority = (uint32_t)self->sched_priority;
  return r;
}

GOSHIM_EXPORT int sched_getparam(pid_t pid, struct sched_param* p) {
  G* self = sched_target(pid);
  if (self && self->rt_locked) {
    pid = 0;  // its own kernel thread: the priority applied (priority protection included)
    self = nullptr;
  }
  if (self) {
    if (!p) return fail(EINVAL);
    memset(p, 0, sizeof *p);
    p->sched_priority = self->sched_priority;
    return 0;
  }
  long r = sys::sched_getparam(pid, p);
  int pol;
  struct sched_param sp;
  // A kernel thread raised as a PI mutex owner: its own priority, as natively.
  if (r >= 0 && pid >= 0 && pi_own_sched(pid ? pid : (pid_t)sys::gettid(), &pol, &sp))
    *p = sp;
  return r < 0 ? fail((int)-r) : 0;
}

GOSHIM_EXPORT int sched_yield(void) {
  if (shim::user_g()) {
    // No other goroutine to run: the M's kernel thread yields its CPU, as
    // the caller's would natively (a kernel thread, of this process or
    // another, that the M keeps from the CPU, e.g. one woken by this G).
    if (!gosched()) sys::sched_yield();
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
