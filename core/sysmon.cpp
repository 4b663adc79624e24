// sysmon (see sysmon.hpp).
#include "core/sysmon.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <string.h>
#include <time.h>

#include "core/jemalloc_glue.hpp"
#include "core/mcache.hpp"
#include "core/netpoll.hpp"
#include "core/ownthread.hpp"
#include "core/preempt.hpp"
#include "core/privfd.hpp"
#include "core/proc.hpp"
#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "core/stack.hpp"
#include "core/signal.hpp"
#include "core/timer.hpp"
#include "core/trace.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

void (*sysmon_tick_hook)(int64_t now) = nullptr;
void (*sysmon_stall_hook)(M* mp, G* gp, int64_t stalled_ns) = nullptr;
void (*sysmon_pinned_hook)(M* mp, G* gp, int64_t stalled_ns) = nullptr;
int64_t sysmon_pinned_ns = 0;

namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kForcePreemptNs = 10 * kMs;  // a G's time slice
constexpr int64_t kPollIdleNs = 10 * kMs;      // netpoll if nobody did for this long
constexpr int64_t kSyscallRetakeNs = 10 * kMs; // retake an idle-system P after this
constexpr int64_t kStallMinNs = 20000;         // a stuck M: no CPU for at least this
constexpr int64_t kReapEveryNs = 1000 * kMs;

}  // namespace

bool syscall_line_parse(const char* line, uint64_t* nr, uint64_t* arg0) {
  const char* p = line;
  if (*p < '0' || *p > '9') return false;  // "running", or -1 (not in a call)
  uint64_t v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + (uint64_t)(*p++ - '0');
  if (p[0] != ' ' || p[1] != '0' || p[2] != 'x') return false;
  uint64_t a = 0;
  int digits = 0;
  for (p += 3;; p++, digits++) {
    int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
    if (d < 0) break;
    a = a * 16 + (uint64_t)d;
  }
  if (digits == 0 || digits > 16 || (*p != ' ' && *p != '\n' && *p != 0)) return false;
  *nr = v;
  *arg0 = a;
  return true;
}

namespace {
uint32_t load_tick(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
}  // namespace

bool retake_same_slice(P* pp, int64_t now) {
  uint32_t t = load_tick(&pp->schedtick);
  if (pp->sm_schedtick == t) return true;
  pp->sm_schedtick = t;
  pp->sm_schedwhen = now;
  pp->sm_cputime = -1;
  pp->sm_slice_cpu = -1;
  return false;
}

bool syscall_p_keep(bool runq_empty, int32_t global_runq, int32_t spinning_or_idle, int64_t in_call_ns) {
  return runq_empty && global_runq == 0 && spinning_or_idle > 0 && in_call_ns < kSyscallRetakeNs;
}

bool slice_computing(int64_t slice_ns, int64_t dcpu, bool alone, bool (*asleep)(M*), M* mp) {
  return slice_ns >= kForcePreemptNs && dcpu > 0 && (dcpu * 2 >= slice_ns || (!alone && !asleep(mp)));
}

bool stall_suspect(int64_t dcpu, int64_t dt) { return dt > 0 && dcpu * 2 < dt && dt >= kStallMinNs; }

int64_t sysmon_delay_us(int64_t delay_us, int idle) {
  if (idle == 0)
    delay_us = 20;
  else if (idle > 50)
    delay_us *= 2;
  return delay_us > 10000 ? 10000 : delay_us;
}

bool rescue_decide(bool stranded, bool* wanted, int* looks, bool (*retry_due)()) {
  if (!stranded) {
    *looks = 0;
    *wanted = false;  // an M took the work
    return false;
  }
  if (!*wanted && ++*looks < 2) return false;
  if (!retry_due()) return false;  // after a failure: not before its pause
  *looks = 0;
  *wanted = false;
  return true;
}

bool gs_stranded() {
  bool stranded = sched.npidle.load(std::memory_order_seq_cst) != 0 &&
                  sched.nmspinning.load(std::memory_order_seq_cst) == 0;
  if (stranded && sched.runqsize.load(std::memory_order_seq_cst) == 0) {
    // Or in the ring of a busy P, where a spinning M would steal them
    // (runnext is left to its P, as stealing does until the last pass).
    stranded = false;
    for (int i = 0; i < sched.gomaxprocs && !stranded; i++) {
      P* pp = allp(i);
      stranded = pp->status.load(std::memory_order_relaxed) != PStatus::Idle &&
                 pp->runqhead.load(std::memory_order_relaxed) !=
                     pp->runqtail.load(std::memory_order_relaxed);
    }
  }
  return stranded;
}

namespace {

// The CPU time consumed by mp's kernel thread, or -1.
int64_t cputime_of(M* mp) {
  if (mp->tid <= 0) return -1;
  clockid_t clk = (clockid_t)((~(unsigned)mp->tid << 3) | 6);  // per-thread CPUCLOCK_SCHED
  struct timespec ts;
  if (sys::clock_gettime(clk, &ts) != 0) return -1;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool asleep_in_kernel(M* mp);
char kernel_state(M* mp);

// Ps replaced while their M was stuck, still in use by that M. Sysmon asks
// their G to yield (as for a long time slice) so that the M reaches the
// scheduler and retires the P. Only sysmon touches this list.
constexpr int kMaxRetiring = 64;
P* retiring[kMaxRetiring];
int nretiring;

void watch_retiring(int64_t now) {
  for (int i = 0; i < nretiring;) {
    P* pp = retiring[i];
    M* mp = pp->m;
    if (!pp->retired.load(std::memory_order_acquire) || !mp) {
      retiring[i] = retiring[--nretiring];
      continue;
    }
    // Its G yields at its next interposed call; a signal only if it keeps
    // computing for a whole time slice (a signal would end a system call
    // such as nanosleep with EINTR).
    G* cur = mp->curg;
    if (cur) cur->preempt.store(true, std::memory_order_release);
    if (cur && sysmon_pinned_ns && sysmon_pinned_hook && !pp->sm_pinned_told &&
        now - pp->sm_pinned_since >= sysmon_pinned_ns) {
      pp->sm_pinned_told = true;
      sysmon_pinned_hook(mp, cur, now - pp->sm_pinned_since);
    }
    int64_t cpu = cputime_of(mp);
    if (pp->sm_slice_cpu < 0 || cpu < 0) {
      pp->sm_slice_cpu = cpu;
      pp->sm_slice_when = now;
    } else if (now - pp->sm_slice_when >= kForcePreemptNs) {
      if (cpu > pp->sm_slice_cpu &&
          ((cpu - pp->sm_slice_cpu) * 2 >= now - pp->sm_slice_when || !asleep_in_kernel(mp)))
        preemptone(pp);
      pp->sm_slice_cpu = cpu;
      pp->sm_slice_when = now;
    }
    i++;
  }
}

// pp's M shows no progress: give pp's work to a spare P.
void replace_stalled(int idx, P* pp, M* mp, int64_t stalled) {
  P* np = spare_get();
  if (!np) return;
  trace_ev(TraceEv::Stall, nullptr, (uint64_t)idx);
  np->id = idx;
  np->status.store(PStatus::Idle, std::memory_order_relaxed);
  np->retired.store(false, std::memory_order_relaxed);
  np->sm_schedtick = ~0u;
  np->sm_cputime = -1;
  np->sm_stallwhen = 0;
  // The stuck M is in the kernel: its queue only changes if it wakes up;
  // whatever it adds then is drained when it retires pp. Take everything:
  // up to a ring's worth stays on np, the rest goes to the global queue.
  GQueue q;
  bool inherit;
  while (G* gp = runqsteal(np, pp, true)) {
    q.push_back(gp);
    while (G* g2 = runqget(np, &inherit)) q.push_back(g2);
  }
  while (q.size > 0 && runqlen(np) < kRunqSize / 2) runqput(np, q.pop(), false);
  if (!q.empty()) {
    sched.lock.lock();
    globrunqputbatch(q);
    sched.lock.unlock();
  }
  pp->retired.store(true, std::memory_order_release);
  sched.allp[idx].store(np, std::memory_order_release);
  pp->sm_cputime = -1;
  pp->sm_slice_cpu = -1;
  pp->sm_pinned_since = sys::nanotime() - stalled;
  pp->sm_pinned_told = false;
  if (nretiring < kMaxRetiring) retiring[nretiring++] = pp;
  timers_move(&pp->timers, &np->timers);
  // pp's M may have woken up and put pp on the idle list before it was
  // marked retired.
  pidle_drop_retired(pp);
  sched.nstalls.fetch_add(1, std::memory_order_relaxed);
  if (sysmon_stall_hook) sysmon_stall_hook(mp, mp->curg, stalled);
  handoffp(np);
}

// mp's kernel thread's state letter in /proc (R running or runnable, S
// asleep, D asleep uninterruptibly, ...), or 0 if unknown. Read on the
// privfd thread: sysmon's file must not take a number in the program's
// fd table.
char kernel_state(M* mp) { return task_state(mp->tid); }

// Whether mp's kernel thread is asleep in the kernel (state S or D), as
// opposed to runnable but not given a CPU by the kernel.
bool asleep_in_kernel(M* mp) {
  char s = kernel_state(mp);
  return s == 'S' || s == 'D';
}

// The system call mp's kernel thread is asleep in, as the kernel shows it
// (/proc/self/task/TID/syscall: its number and first argument): 1 if in
// one, 0 if the kernel shows the thread running, -1 otherwise (asleep
// outside a system call, or not known).
int sleeping_call(M* mp, uint64_t* nr, uint64_t* arg0) {
  char path[64];
  rawfmt(path, sizeof path, "/proc/self/task/%d/syscall", (int)mp->tid);
  char buf[256];
  long n = privfd_read(path, buf, sizeof buf - 1);
  if (n <= 0) return -1;
  buf[n] = 0;
  if (strncmp(buf, "running", 7) == 0) return 0;
  return syscall_line_parse(buf, nr, arg0) ? 1 : -1;
}

// Whether mp sleeps in the same system call on the same first argument
// (the same futex word: the same lock) as an M whose P sysmon already
// moved for a stall and which still sleeps there. A spare M for mp's P
// would then most likely run a G that blocks behind the same lock too: on
// an overloaded machine, a lock whose holder waits for a CPU stopped one
// M after another, and sysmon started a kernel thread per look (each
// blocked on the lock at once). Seen under qemu-user 7.2, whose own
// mmap_lock (a pthread mutex: guest mmap, mprotect and every translation
// of new code take it) makes a vCPU thread asleep in a futex wait while
// its goroutine runs: 17 kernel threads at 2 processors in net_echo.
bool behind_replaced(M* mp, uint64_t nr, uint64_t a0) {
  for (int i = 0; i < nretiring; i++) {
    P* rp = retiring[i];
    M* rm = rp->m;
    if (!rm || rm == mp || !rp->retired.load(std::memory_order_acquire)) continue;
    uint64_t nr2, b0;
    if (sleeping_call(rm, &nr2, &b0) == 1 && nr2 == nr && b0 == a0 && asleep_in_kernel(rm)) return true;
  }
  return false;
}

// pp's G has had no scheduling event since sysmon's last look. Samples
// its M's CPU clock. Sets *computing when the G has spent most of its time
// slice (as far as sysmon has seen it) on the CPU, for at least 10 ms: a
// long time slice, preemption's business. Returns true when the M spent
// most of the time since the previous sample asleep in the kernel while
// other work waits for a P: the blocking goshim cannot see (a
// libc-internal lock, a raw system call), so pp's work must move.
bool check_m(P* pp, M* mp, int64_t now, bool* computing) {
  *computing = false;
  G* gp = mp->curg;
  if (!gp || gp->status.load(std::memory_order_relaxed) != GStatus::Running) return false;
  int64_t cpu = cputime_of(mp);
  if (cpu < 0) return false;
  int64_t prev_cpu = pp->sm_cputime, prev_when = pp->sm_stallwhen;
  pp->sm_cputime = cpu;
  pp->sm_stallwhen = now;
  if (pp->sm_slice_cpu < 0) {
    pp->sm_slice_cpu = cpu;
    pp->sm_slice_when = now;
  }
  int64_t slice = now - pp->sm_slice_when;
  // The process's only goroutine (this one): no other could use its P, nor
  // take its turn. Its thread's state is not looked up (/proc: that would
  // start the privfd thread in a program that never made a thread, at its
  // first fork or call slowed by the kernel).
  bool alone = sched.ngoroutines.load(std::memory_order_relaxed) <= 1;
  // Computing: on the CPU for most of the slice, or, on a machine with more
  // runnable threads than CPUs (where the kernel gives it only a share),
  // runnable rather than asleep in a system call.
  *computing = slice_computing(slice, cpu - pp->sm_slice_cpu, alone, asleep_in_kernel, mp);
  if (prev_cpu < 0) return false;  // first look
  if (!stall_suspect(cpu - prev_cpu, now - prev_when)) return false;
  int64_t w = timers_wake_time(&pp->timers);
  // Alone: a due timer, a network wait or a P held for a whole period is
  // no work for another M (every one of them is the stuck goroutine's own;
  // its M sees to them when it schedules); only a queued G is.
  bool work = !runqempty(pp) || sched.runqsize.load(std::memory_order_relaxed) > 0 ||
              (!alone && ((w != 0 && w <= now) || netpoll_any_waiters() ||
                          now - pp->sm_schedwhen >= kSyscallRetakeNs));
  if (!work) return false;
  // Asleep waiting for an event (S): the event may come from a goroutine
  // that needs this P, so the P moves at once. Asleep uninterruptibly (D:
  // the disk, a kernel lock, an fd-table resize waiting for RCU): the
  // kernel ends that wait without any goroutine's help, and every thread
  // that allocates an fd meanwhile waits on the same resize, so a spare M
  // would only block behind it. The P moves once the G has held it for a
  // whole blocking-call period, as for a long visible call.
  // Asleep on one of the allocator's own locks (core/jemalloc_glue.cpp):
  // while its holder runs on a kernel thread the wait ends without any
  // goroutine's help, and a spare M would most often block behind the
  // same lock (on an overloaded machine, where the holder waits for a CPU,
  // that gave one more kernel thread per look: alloc_contention). The P
  // moves if the holder is anything but a goroutine running on a kernel
  // thread the kernel can run: parked, waiting for a P, in a blocking call
  // or asleep in the kernel (a program signal handler that interrupted the
  // allocator and waits for another goroutine, which needs a P:
  // malloc_signal_park).
  if (void* lk = mp->alloc_lock_wait.load(std::memory_order_relaxed)) {
    G* h = alloc_lock_holder(lk);
    // Released since, or held by a g0 or a foreign thread (never parks in
    // there): the lock word names a goroutine holder atomically with taking
    // the lock, so null never hides one.
    if (!h) return false;
    if (h->status.load(std::memory_order_relaxed) == GStatus::Running) {
      M* hm = h->m;
      if (hm && hm != mp && kernel_state(hm) == 'R') return false;
    }
  }
  char s = kernel_state(mp);
  if (s == 'D') return now - pp->sm_schedwhen >= kSyscallRetakeNs;
  if (s != 'S') return false;
  // Asleep in S a moment ago: if the kernel now shows the thread running,
  // its wait ended by itself (under qemu-user, 10 of 41 replacements in
  // net_echo were of threads running again by then); the next look judges
  // it afresh. Asleep behind the same lock as an M already replaced
  // (behind_replaced): as for D, the P moves after a whole blocking-call
  // period.
  uint64_t nr, a0;
  int call = sleeping_call(mp, &nr, &a0);
  if (call == 0) return false;
  if (call == 1 && nretiring != 0 && behind_replaced(mp, nr, a0))
    return now - pp->sm_schedwhen >= kSyscallRetakeNs;
  return true;
}

}  // namespace

uint32_t sysmon_retake(int64_t now) {
  uint32_t n = 0;
  for (int i = 0; i < sched.gomaxprocs; i++) {
    P* pp = allp(i);
    PStatus s = pp->status.load(std::memory_order_acquire);
    if (s == PStatus::Running) {
      if (!retake_same_slice(pp, now)) continue;
      M* mp = pp->m;
      if (!mp) continue;
      bool computing = false;
      int64_t since = now - pp->sm_stallwhen;
      if (check_m(pp, mp, now, &computing)) {
        replace_stalled(i, pp, mp, since);
        n++;
        continue;
      }
      // Preempt only a G that is computing: a signal to an M asleep in a
      // system call would end calls such as nanosleep with EINTR.
      // Not counted in n (as in Go's retake): a G preempted every slice
      // (two Gs in a runnext ping-pong share one slice) must not keep
      // sysmon waking every 20 us.
      if (computing) preemptone(pp);
    } else if (s == PStatus::Syscall) {
      // A G that has kept this P for a whole slice through a series of
      // short blocking calls (a loop reading a file) is retaken like one in
      // a long call: each call alone is too short to be seen twice (Go's
      // retake judges _Psyscall Ps by their schedtick too).
      bool long_slice = retake_same_slice(pp, now) && now - pp->sm_schedwhen >= kForcePreemptNs;
      uint32_t t = pp->syscalltick.load(std::memory_order_relaxed);
      M* bm = pp->blocking_m.load(std::memory_order_relaxed);
      if (pp->sm_syscalltick != t) {
        pp->sm_syscalltick = t;
        pp->sm_syscallwhen = now;
        pp->sm_sys_cpu = bm ? cputime_of(bm) : -1;
        if (!long_slice) continue;
      }
      // A G that has had the P for a whole slice through a series of short
      // calls whose thread stays on the CPU (a loop reading from the page
      // cache): it yields at its next interposed call and its M keeps the
      // P. Handing the P off would add a thread competing for the CPUs
      // while this one copies, and the M coming back from its call would
      // find no P (a context switch per slice on every CPU). A single call
      // that lasts a slice is still retaken below.
      if (long_slice && bm && now - pp->sm_syscallwhen < kSyscallRetakeNs &&
          !asleep_in_kernel(bm)) {
        G* cur = bm->curg;
        if (cur && !cur->is_g0()) cur->preempt.store(true, std::memory_order_release);
        continue;
      }
      // The same blocking call for at least one sysmon tick. Retake it if
      // anything waits, or if it lasts long (timers and netpoll need a P).
      if (syscall_p_keep(runqempty(pp), sched.runqsize.load(std::memory_order_relaxed),
                         sched.nmspinning.load() + sched.npidle.load(), now - pp->sm_syscallwhen))
        continue;
      // Better than Go's retake: a call that keeps its kernel thread on the
      // CPU (a copy from the page cache) frees no CPU for another thread;
      // handing its P off would only add a thread competing for the CPUs.
      // Retake a P whose M sleeps in the kernel (the disk, a lock), or one
      // that has kept it for a whole time slice.
      if (!long_slice && bm && pp->sm_sys_cpu >= 0 && now - pp->sm_syscallwhen < kSyscallRetakeNs) {
        int64_t cpu = cputime_of(bm);
        if (cpu >= 0 && ((cpu - pp->sm_sys_cpu) * 2 >= now - pp->sm_syscallwhen ||
                         (cpu > pp->sm_sys_cpu && !asleep_in_kernel(bm))))
          continue;
      }
      PStatus exp = PStatus::Syscall;
      if (pp->status.compare_exchange_strong(exp, PStatus::Idle, std::memory_order_acq_rel)) {
        sched.nhandoff.fetch_add(1, std::memory_order_relaxed);
        handoffp(pp);
        n++;
      }
    }
  }
  return n;
}

namespace {

// Lets one surplus idle M exit now and then (after a burst of blocking calls).
void reap_idle_ms(int64_t now) {
  static int64_t last;
  if (now - last < kReapEveryNs) return;
  last = now;
  int keep = sched.gomaxprocs < 4 ? 4 : sched.gomaxprocs;
  sched.lock.lock();
  M* mp = nullptr;
  if (sched.nmidle > keep) {
    // Never M0 (the process's initial thread), nor an M still on its way
    // to stopm (listed early: sched.cpp).
    M** pm = &sched.midle;
    while (*pm && ((*pm)->id == 0 || (*pm)->listed_early)) pm = &(*pm)->schedlink;
    if (*pm) {
      mp = *pm;
      *pm = mp->schedlink;
      mp->schedlink = nullptr;
      sched.nmidle--;
    }
  }
  sched.lock.unlock();
  if (mp) {
    mp->exit_requested = true;
    mp->park.wakeup();
  }
}

// sysmon sleeps on this word so that a signal to route can wake it early.
std::atomic<uint32_t> wake_word{0};
// sysmon is in a backed-off sleep (kNapUs or longer); a kick ends it. Not
// for shorter sleeps: kicks at every blocking call would keep sysmon
// spinning at its 20 us period, taking CPU from the Ms.
constexpr int64_t kNapUs = 320;
std::atomic<bool> napping{false};
std::atomic<bool> kicked{false};
// Kicks that do not pay off (the looks that follow one retook no P) are
// rate-limited: after each fruitless one the quiet time doubles, from
// 40 us up to sysmon's longest nap (10 ms); a useful one lifts the limit.
// A loop of page-cache reads, each entering a Short call with work
// queued, kicked sysmon out of every nap, and the wake-ups took 10 % of
// the CPUs from the readers.
constexpr int64_t kKickQuietMinNs = 40000;
constexpr int64_t kKickQuietMaxNs = 10000000;
std::atomic<int64_t> kick_after{0};
std::atomic<int64_t> kick_quiet{0};
int kick_looks;  // sysmon only: looks left that may prove a kick useful

// newm left work for sysmon (sysmon_want_m).
std::atomic<bool> want_m{false};
// Consecutive looks that found Gs on the global queue, a P idle and no M
// looking for work (sysmon only).
int stranded_looks;

// Starts an M for runnable Gs that no M will look for: those newm left
// behind (a failed or deferred thread creation), or any lost wakeup that
// leaves Gs queued (globally or on a busy P), a P idle and no M spinning
// on two consecutive looks (every M can be idle in stopm then, and nothing else
// would ever wake one). Returns true if it started one.
bool rescue_stranded() {
  bool stranded = gs_stranded();
  bool wanted = want_m.load(std::memory_order_acquire), w = wanted;
  bool start = rescue_decide(stranded, &w, &stranded_looks, newm_retry_due);
  if (start || (wanted && !w)) want_m.store(false, std::memory_order_relaxed);
  if (start) wakep();
  return start;
}

// sysmon's kernel thread (sysmon_tid).
std::atomic<pid_t> sysmon_tid_{0};

// Set by sysmon once its allocator state is made (sysmon_start waits).
std::atomic<uint32_t> sysmon_alloc_ready{0};

void* sysmon_main(void*) {
  // Program handlers never run here (signal_route opens the signals goshim
  // routes); the credential broadcast (33) must. The thread starts with
  // this mask (signal_create_begin), so that no signal finds it before
  // tls_g says it is sysmon.
  tls_g = sysmon_g();
  sysmon_tid_.store((pid_t)sys::gettid(), std::memory_order_release);
  mcache_runtime_thread_start();  // its allocations: the runtime's own arena (mcache.hpp)
  sysmon_alloc_ready.store(1, std::memory_order_release);
  sys::futex_wake(&sysmon_alloc_ready, 1);
  // The kernel's default timer slack (50 us) would stretch every 20 us
  // sleep to about 70-120 us: the hand-off of a P stuck in a blocking call
  // would take that long.
  sys::prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0);
  int64_t delay_us = 20;
  int idle = 0;
  for (;;) {
    delay_us = sysmon_delay_us(delay_us, idle);
    struct timespec ts = {0, (long)delay_us * 1000};
    napping.store(delay_us >= kNapUs, std::memory_order_relaxed);
    if (wake_word.exchange(0, std::memory_order_acq_rel) == 0) sys::futex_wait(&wake_word, 0, &ts);
    wake_word.store(0, std::memory_order_relaxed);
    napping.store(false, std::memory_order_relaxed);
    // Kicked: look now, and again 20 us later (a blocking call is retaken
    // when seen twice), then back off again unless there was work.
    if (kicked.exchange(false, std::memory_order_relaxed)) {
      delay_us = 10;
      kick_looks = 2;
    }
    int64_t now = sys::nanotime();
    signal_route();

    int64_t lastpoll = sched.lastpoll.load(std::memory_order_relaxed);
    if (netpoll_any_waiters() && lastpoll != 0 && lastpoll + kPollIdleNs < now) {
      sched.lastpoll.compare_exchange_strong(lastpoll, now);
      GQueue q;
      netpoll(0, q);
      if (!q.empty()) {
        sched.npollsysmon.fetch_add(q.size, std::memory_order_relaxed);
        ready_list(q);
        idle = 0;
      }
    }
    rescue_stranded();  // not work for sysmon itself: its naps still back off
    if (sysmon_retake(now) != 0) {
      idle = 0;
      if (kick_looks > 0) {
        kick_looks = 0;
        kick_quiet.store(0, std::memory_order_relaxed);
        kick_after.store(0, std::memory_order_relaxed);
      }
    } else {
      idle++;
      if (kick_looks > 0 && --kick_looks == 0) {
        int64_t q = kick_quiet.load(std::memory_order_relaxed) * 2;
        if (q < kKickQuietMinNs) q = kKickQuietMinNs;
        if (q > kKickQuietMaxNs) q = kKickQuietMaxNs;
        kick_quiet.store(q, std::memory_order_relaxed);
        kick_after.store(now + q, std::memory_order_relaxed);
      }
    }
    if (nretiring) watch_retiring(now);
    reap_idle_ms(now);
    stack_scavenge(now);
    gfree_scavenge(now);
    if (sysmon_tick_hook) sysmon_tick_hook(now);
  }
  return nullptr;
}

}  // namespace

void sysmon_kick() {
  if (!napping.load(std::memory_order_relaxed)) return;
  int64_t after = kick_after.load(std::memory_order_relaxed);
  if (after && sys::nanotime() < after) return;
  kicked.store(true, std::memory_order_relaxed);
  napping.store(false, std::memory_order_relaxed);
  sysmon_wake();
}

void sysmon_want_m() {
  want_m.store(true, std::memory_order_release);
  sysmon_wake();
}

char task_state(pid_t tid) {
  if (tid <= 0) return 0;
  char path[64];
  rawfmt(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  char buf[256];
  if (privfd_read(path, buf, sizeof buf) <= 0) return 0;
  const char* p = strrchr(buf, ')');  // the command may contain spaces
  if (!p || p[1] != ' ') return 0;
  return p[2];
}

pid_t sysmon_tid() { return sysmon_tid_.load(std::memory_order_acquire); }

// Signal-safe.
void sysmon_wake() {
  if (wake_word.exchange(1, std::memory_order_acq_rel) == 0) sys::futex_wake(&wake_word, 1);
}

// sysmon's G: a g0 without an M, so that signal handlers running on the
// sysmon thread know they must route, not run, the program's handler.
G* sysmon_g() {
  static constinit G g;
  g.flags = kGFlagG0;
  return &g;
}

void sysmon_after_fork() {
  nretiring = 0;
  sysmon_tid_.store(0, std::memory_order_relaxed);  // the parent's
}

void sysmon_start() {
  sysmon_alloc_ready.store(0, std::memory_order_relaxed);
  int err = ownthread_start(sysmon_main, nullptr, 256 * 1024);  // sysmon_main sets tls_g first
  if (err != 0) fatalf("cannot start sysmon (error %d)", err);
  // Waits for sysmon's first allocation (its thread's allocator state, the
  // runtime arena's first extent: jemalloc's global locks), made while no
  // goroutine of the program can hold one of those locks. Started behind
  // the program's first goroutines, sysmon blocked there behind a program
  // handler that had interrupted free() and waited for main, which needed
  // sysmon to hand it a P: malloc_signal_park hung 1 run in 40 at the
  // default configuration under load.
  while (sysmon_alloc_ready.load(std::memory_order_acquire) == 0)
    sys::futex_wait(&sysmon_alloc_ready, 0, nullptr);
}

}  // namespace goshim
