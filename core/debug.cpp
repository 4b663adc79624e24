// GOSHIM_DEBUG features run from sysmon (see debug.hpp).
#include "core/debug.hpp"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "core/config.hpp"
#include "core/dump.hpp"
#include "core/netpoll.hpp"
#include "core/privfd.hpp"
#include "core/proc.hpp"
#include "core/procstatus.hpp"
#include "core/rawlog.hpp"
#include "core/runtime.hpp"
#include "core/sched.hpp"
#include "core/signal.hpp"
#include "core/sysmon.hpp"
#include "core/timer.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

int64_t start_ns;
int64_t start_wall_ns;
std::atomic<int64_t> peak_kthreads{0};
std::atomic<int64_t> created_1to1{0};
std::atomic<uint64_t> npinned{0};

// Kernel threads of the process (/proc/self/status), or -1.
int kernel_threads() {
  StatusField f = {"Threads", 10, 0, false};
  return proc_status("/proc/self/status", &f, 1) && f.found ? (int)f.value : -1;
}

void note_kthreads() {
  int k = kernel_threads();
  int64_t peak = peak_kthreads.load(std::memory_order_relaxed);
  while (k > peak && !peak_kthreads.compare_exchange_weak(peak, k)) {
  }
}

// ---- deadlock --------------------------------------------------------------------

// Some timer of the process is armed: alarm/setitimer (any of the three
// interval timers) or a POSIX timer (timer_create; listed in
// /proc/self/timers). When the list cannot be read, a timer may exist.
// Scans /proc/self/timers (on the privfd thread): 1 if a POSIX timer is
// armed or the list cannot be read, else 0.
long posix_timer_armed(void*) {
  long fd = sys::openat(-100, "/proc/self/timers", O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return 1;
  // Lines "ID: N" name the timers; the other lines are skipped.
  static const char kTag[] = "ID: ";
  char buf[1024];
  int col = 0;  // position in the current line; -1: not an ID line
  long id = -1;
  bool armed = false;
  long n;
  while (!armed && (n = sys::read((int)fd, buf, sizeof buf)) > 0) {
    for (long i = 0; i < n && !armed; i++) {
      char c = buf[i];
      if (c == '\n') {
        if (id >= 0) {
          struct timespec spec[2];  // interval, value
          long r = sys::raw2(SYS_timer_gettime, id, (long)spec);
          armed = r != 0 || spec[1].tv_sec || spec[1].tv_nsec;
        }
        col = 0;
        id = -1;
      } else if (col >= 0 && col < 4) {
        col = c == kTag[col] ? col + 1 : -1;
        if (col == 4) id = 0;
      } else if (col == 4) {
        if (c >= '0' && c <= '9') id = id * 10 + (c - '0');
        else col = -1, id = -1;
      }
    }
  }
  sys::close((int)fd);
  return armed;
}

bool timer_armed() {
  struct {
    long iv_sec, iv_usec, v_sec, v_usec;
  } it;
  for (int which = 0; which < 3; which++)
    if (sys::raw2(SYS_getitimer, which, (long)&it) == 0 && (it.v_sec || it.v_usec)) return true;
  return privfd_run(posix_timer_armed, nullptr) != 0;
}

// The process has a child (running, stopped or a zombie): it may send a
// signal, write to a pipe, post a process-shared object.
bool has_children() {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  long r = sys::raw5(SYS_waitid, P_ALL, 0, (long)&si,
                     WNOHANG | WNOWAIT | WEXITED | WSTOPPED | WCONTINUED | __WALL, 0);
  return r != -ECHILD;
}

// Something goshim cannot see may still wake a goroutine or end the
// program in its own way.
bool others_could_wake() {
  // Program signal handlers may post a semaphore or write a flag: a
  // program waiting for a signal is not deadlocked.
  for (int sig = 1; sig <= 64; sig++)
    if (sig != config.preempt_signal && sig != 32 && sig != 33 && signal_has_handler(sig))
      return true;
  // Kernel threads goshim did not create can wake goroutines.
  int k = kernel_threads();
  int ours = sched.mcount + 1 + privfd_threads();  // the Ms, sysmon, privfd
  if (k < 0 || k > ours) return true;
  // A timer will send a signal (even with no handler, its default action
  // ends the program as it would natively).
  if (timer_armed()) return true;
  return has_children();
}

// Reports a deadlock once per episode (no park or creation in between);
// with deadlock=fatal also exits with status 2. Any other process may
// still end or wake the program (a signal, a write to a shared mapping),
// so by default the program keeps waiting, as it would natively.
void check_deadlock(int64_t now) {
  static int64_t last_check;
  static uint64_t seen_parks, seen_created;
  static int strikes;
  static bool reported;
  if (now - last_check < 100 * 1000000LL) return;
  last_check = now;
  uint64_t parks = total_parks(), created = sched.ngcreated.load();
  bool asleep = all_asleep();
  if (!asleep || parks != seen_parks || created != seen_created) {
    strikes = 0;
    reported = false;
    seen_parks = parks;
    seen_created = created;
    return;
  }
  if (reported) return;
  if (others_could_wake()) {
    strikes = 0;
    return;
  }
  if (++strikes < 2) return;  // unchanged over two looks, 200 ms apart
  reported = true;
  rawlog("goshim: all goroutines are asleep - deadlock!\n\n");
  dump_goroutines(2, "goroutines:");
  if (config.deadlock == 2) sys::exit_group(2);
  rawlog("goshim: the program keeps waiting (GOSHIM_DEBUG=deadlock=fatal exits instead)\n");
}

// ---- schedtrace --------------------------------------------------------------------

void tick(int64_t now) {
  static int64_t last_trace;
  if (config.stats) note_kthreads();
  if (dump_requested()) dump_goroutines(2, "goshim: goroutine dump (dump signal)");
  if (config.schedtrace_ms && now - last_trace >= (int64_t)config.schedtrace_ms * 1000000) {
    last_trace = now;
    schedtrace_print(2, config.scheddetail);
  }
  if (config.deadlock) check_deadlock(now);
}

// Every G that pinned its M long enough for sysmon to take the P away.
void stall(M* /*mp*/, G* /*gp*/, int64_t /*stalled_ns*/) { npinned.fetch_add(1, std::memory_order_relaxed); }

// Names of the system calls a thread is most often found stuck in.
const char* syscall_name(long nr) {
  switch (nr) {
    case SYS_read: return "read";
    case SYS_write: return "write";
    case SYS_readv: return "readv";
    case SYS_writev: return "writev";
    case SYS_pread64: return "pread64";
    case SYS_pwrite64: return "pwrite64";
#ifdef SYS_poll  // not in the generic table (aarch64)
    case SYS_poll: return "poll";
#endif
    case SYS_ppoll: return "ppoll";
#ifdef SYS_select  // not in the generic table (aarch64)
    case SYS_select: return "select";
#endif
    case SYS_pselect6: return "pselect6";
#ifdef SYS_epoll_wait  // not in the generic table (aarch64)
    case SYS_epoll_wait: return "epoll_wait";
#endif
    case SYS_epoll_pwait: return "epoll_pwait";
    case SYS_futex: return "futex";
    case SYS_nanosleep: return "nanosleep";
    case SYS_clock_nanosleep: return "clock_nanosleep";
    case SYS_accept: return "accept";
    case SYS_accept4: return "accept4";
    case SYS_connect: return "connect";
    case SYS_recvfrom: return "recvfrom";
    case SYS_recvmsg: return "recvmsg";
    case SYS_sendto: return "sendto";
    case SYS_sendmsg: return "sendmsg";
    case SYS_wait4: return "wait4";
    case SYS_waitid: return "waitid";
    case SYS_flock: return "flock";
    case SYS_fcntl: return "fcntl";
    case SYS_ioctl: return "ioctl";
    case SYS_openat: return "openat";
    case SYS_fsync: return "fsync";
#ifdef SYS_pause  // not in the generic table (aarch64)
    case SYS_pause: return "pause";
#endif
    case SYS_rt_sigtimedwait: return "rt_sigtimedwait";
    case SYS_rt_sigsuspend: return "rt_sigsuspend";
    default: return nullptr;
  }
}

// GOSHIM_DEBUG=pinned=MS: gp has kept mp stuck for MS, where goshim cannot
// see (a raw system call, a lock glibc takes internally, a busy loop). Runs
// on sysmon while mp is still stuck, so the backtrace is where it is stuck.
void pinned(M* mp, G* gp, int64_t stalled_ns) {
  // What the kernel thread is blocked in: /proc/self/task/TID/syscall
  // ("NR args... SP PC", or "running").
  char path[64], sc[160] = "";
  rawfmt(path, sizeof path, "/proc/self/task/%d/syscall", (int)mp->tid);
  if (privfd_read(path, sc, sizeof sc) < 0) sc[0] = 0;
  char where[64];
  if (sc[0] >= '0' && sc[0] <= '9') {
    long nr = atol(sc);
    const char* name = syscall_name(nr);
    rawfmt(where, sizeof where, "blocked in system call %ld%s%s%s", nr, name ? " (" : "",
           name ? name : "", name ? ")" : "");
  }
  else
    rawfmt(where, sizeof where, "running without calling into goshim");
  rawlog("goshim: pinned: goroutine %lu%s%s%s has held M%d for %ld ms, %s, where goshim "
         "cannot see it; its processor went to another thread\n",
         (unsigned long)gp->goid, gp->name[0] ? " \"" : "", gp->name, gp->name[0] ? "\"" : "",
         mp->id, (long)(stalled_ns / 1000000), where);
  dump_goroutine(2, gp);
}

}  // namespace

// Every goroutine parked on in-process synchronization (no timed wait, no
// fd, no blocking call, no signal wait). others_could_wake() then looks
// for what could still end such a wait from outside.
bool all_asleep() {
  if (netpoll_any_waiters()) return false;
  // An M that holds a P is doing something (an M releases its P before it
  // sleeps): say, finishing a G's exit on g0 before it wakes the joiner,
  // for as long as the kernel keeps it descheduled.
  if (sched.npidle.load(std::memory_order_seq_cst) < sched.gomaxprocs) return false;
  bool any = false;
  auto check = [&](G* gp) -> bool {
    if (gp->magic != kGMagic) return true;
    GStatus st = gp->status.load(std::memory_order_acquire);
    // A G that has died but whose exit has not yet told its joiner
    // (goexit_g0 between the two): its M is about to wake someone.
    if (st == GStatus::Dead &&
        !(gp->join_state.load(std::memory_order_acquire) & (kJoinDetached | kJoinExited)))
      return false;
    if (st == GStatus::Idle || st == GStatus::Dead) return true;
    if (st != GStatus::Waiting) return false;
    if (gp->timer.heap.load(std::memory_order_relaxed)) return false;  // a timed wait
    switch (gp->waitreason) {
      case WaitReason::SigWait:
      case WaitReason::Sleep:
      case WaitReason::IORead:
      case WaitReason::IOWrite:
      case WaitReason::Poll:
      case WaitReason::Select:
      case WaitReason::EpollWait:
      case WaitReason::Accept:
      case WaitReason::Connect:
      case WaitReason::Blocking:
      case WaitReason::Yield:
      case WaitReason::Preempted:
        return false;
      default:
        break;
    }
    any = true;
    return true;
  };
  if (!check(main_g())) return false;
  size_t n = arena_nslots();
  for (size_t i = 0; i < n; i++)
    if (!check(arena_slot_g(i))) return false;
  return any;
}


void debug_init() {
  start_ns = sys::nanotime();
  start_wall_ns = sys::walltime();
  sysmon_tick_hook = tick;
  sysmon_stall_hook = stall;
  sysmon_pinned_hook = pinned;
  sysmon_pinned_ns = (int64_t)config.pinned_ms * 1000000;
}

void schedtrace_print(int fd, bool detail) {
  char line[1024];
  int64_t up = (sys::nanotime() - start_ns) / 1000000;
  int idleprocs = sched.npidle.load();
  int threads = kernel_threads();
  size_t len = rawfmt(line, sizeof line,
                      "SCHED %ldms: gomaxprocs=%d idleprocs=%d threads=%d spinningthreads=%d "
                      "idlethreads=%d runqueue=%d gcount=%ld pinned=%lu [",
                      (long)up, sched.gomaxprocs, idleprocs, threads, sched.nmspinning.load(),
                      sched.nmidle, sched.runqsize.load(), (long)sched.ngoroutines.load(),
                      (unsigned long)npinned.load());
  for (int i = 0; i < sched.gomaxprocs; i++)
    len += rawfmt(line + len, sizeof line - len, i ? " %u" : "%u", runqlen(allp(i)));
  len += rawfmt(line + len, sizeof line - len, "]\n");
  rawlog_fd(fd, "%s", line);
  if (!detail) return;
  for (int i = 0; i < sched.gomaxprocs; i++) {
    P* pp = allp(i);
    static const char* const ps[] = {"idle", "running", "syscall"};
    M* mp = pp->m;
    rawlog_fd(fd, "  P%d: status=%s schedtick=%u syscalltick=%u m=%d runqsize=%u gfreecnt=%d timers=%d\n",
              i, ps[(int)pp->status.load()], pp->schedtick, pp->syscalltick.load(), mp ? mp->id : -1,
              runqlen(pp), pp->ngfree, timers_len(&pp->timers));
  }
  for (M* mp = allm_head(); mp; mp = mp->alllink) {
    if (mp->dead) continue;
    G* cg = mp->curg;
    rawlog_fd(fd, "  M%d: tid=%d p=%d curg=%ld spinning=%d blocked=%d locks=%d\n", mp->id,
              (int)mp->tid, mp->p ? mp->p->id : -1, cg ? (long)cg->goid : -1L, (int)mp->spinning,
              (int)mp->blocked, mp->locks.load());
  }
  auto g_line = [&](G* gp) {
    if (gp->magic != kGMagic) return;
    GStatus st = gp->status.load();
    if (st == GStatus::Idle) return;
    static const char* const gs[] = {"idle", "runnable", "running", "syscall", "waiting", "dead"};
    rawlog_fd(fd, "  G%lu: status=%s(%s) m=%d name=%s\n", (unsigned long)gp->goid, gs[(int)st],
              st == GStatus::Waiting ? wait_reason_name(gp->waitreason)
              : st == GStatus::Syscall && gp->blocking_what ? gp->blocking_what : "",
              gp->m ? gp->m->id : -1, gp->name);
  };
  g_line(main_g());
  size_t n = arena_nslots();
  for (size_t i = 0; i < n; i++) g_line(arena_slot_g(i));
}

void stats_thread_created() {
  created_1to1.fetch_add(1, std::memory_order_relaxed);
  note_kthreads();  // 1:1: every live thread is a kernel thread
}

void stats_print(bool mn) {
  note_kthreads();
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double wall = (sys::walltime() - start_wall_ns) / 1e9;
  double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec / 1e6;
  char buf[1024];
  size_t n = rawfmt(buf, sizeof buf,
                    "goshim stats (%s):\n"
                    "  threads created        %lu\n"
                    "  peak live threads      %ld\n"
                    "  peak kernel threads    %ld\n"
                    "  voluntary switches     %ld\n"
                    "  involuntary switches   %ld\n"
                    "  peak RSS               %ld KiB\n"
                    "  wall time              %ld ms\n"
                    "  CPU time               %ld ms\n",
                    mn ? "M:N" : "1:1",
                    (unsigned long)(mn ? sched.ngcreated.load() : created_1to1.load()),
                    (long)(mn ? sched.ngpeak.load() : peak_kthreads.load()),
                    (long)peak_kthreads.load(), ru.ru_nvcsw, ru.ru_nivcsw, ru.ru_maxrss,
                    (long)(wall * 1000), (long)(cpu * 1000));
  if (mn)
    n += rawfmt(buf + n, sizeof buf - n,
                "  goroutine parks        %lu\n"
                "  steals                 %lu\n"
                "  processor handoffs     %lu\n"
                "  preemptions            %lu\n"
                "  stuck-thread handoffs  %lu\n"
                "  late network wake-ups  %lu\n"
                "  busy network wake-ups  %lu\n"
                "  older global picks     %lu\n",
                (unsigned long)total_parks(), (unsigned long)sched.nsteal.load(),
                (unsigned long)sched.nhandoff.load(), (unsigned long)sched.npreempt.load(),
                (unsigned long)sched.nstalls.load(), (unsigned long)sched.npollsysmon.load(),
                (unsigned long)sched.npollbusy.load(), (unsigned long)sched.nglobolder.load());
  const char* path = getenv("GOSHIM_STATS_FILE");
  int fd = 2;
  if (path && *path) {
    long f = sys::openat(-100, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (f >= 0) fd = (int)f;
  }
  rawlog_fd(fd, "%s", buf);
  if (fd != 2) sys::close(fd);
}

}  // namespace goshim
