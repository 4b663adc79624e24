// Goroutine dumps (see dump.hpp).
//
// A parked G can start running again while sysmon unwinds its stack, so
// the unwinder may read a stack that changes under it. The dump runs under
// a fault guard: a SIGSEGV/SIGBUS taken by sysmon while dumping ends that
// backtrace ("<stack changed>") instead of the process.
#define UNW_LOCAL_ONLY
#include "core/dump.hpp"
#include "core/ownfd.hpp"
#include "core/privfd.hpp"

#include <dlfcn.h>
#include <libunwind.h>
#include <link.h>
#include <setjmp.h>
#include <fcntl.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/ucontext.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include <initializer_list>

#include "arch/arch.hpp"
#include "core/config.hpp"
#include "core/preempt.hpp"
#include "core/proc.hpp"
#include "core/rawlog.hpp"
#include "core/runtime.hpp"
#include "core/sched.hpp"
#include "core/signal.hpp"
#include "core/sysmon.hpp"
#include "core/tls.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

std::atomic<bool> requested{false};

// Fault guard for the dumping thread.
sigjmp_buf guard_buf;
std::atomic<long> guard_tid{0};

// Backtrace of a running G, written by its M in a signal handler. The
// handler claims the request (running_target: gp -> kClaimed) before it
// writes running_buf; the dumper withdraws an unanswered one the same way
// (gp -> nullptr), so an answer arriving late (the M was descheduled) never
// writes into the buffer, nor runs, while the dumper has moved on.
char running_buf[4096];
std::atomic<G*> running_target{nullptr};
std::atomic<int> running_done{0};
G* const kClaimed = (G*)1;

constexpr int kMaxFrames = 48;

}  // namespace

bool dladdr_is_self(uintptr_t pc);

namespace {

// "_ZN6goshim11thread_joinEPNS_1GEPPvl" -> "goshim::thread_join": enough
// of the Itanium mangling for goshim's own nested names.
void demangle_lite(char* name, size_t size) {
  if (strncmp(name, "_ZN", 3) != 0) return;
  char out[128];
  size_t o = 0;
  const char* p = name + 3;
  while (*p >= '0' && *p <= '9') {
    int n = 0;
    while (*p >= '0' && *p <= '9') n = n * 10 + (*p++ - '0');
    if (o && o + 2 < sizeof out) out[o++] = ':', out[o++] = ':';
    for (int i = 0; i < n && *p && o + 1 < sizeof out; i++) out[o++] = *p++;
  }
  if (*p != 'E' || o == 0) return;
  out[o] = 0;
  rawfmt(name, size, "%s", out);
}

// Unwinds from cursor, appending "  fn+0xoff\n" lines to out. Frames inside
// goshim are folded into the interposed entry point the program called.
size_t unwind_into(unw_cursor_t* c, char* out, size_t size) {
  size_t len = 0;
  int frames = 0;
  bool last_goshim = false;
  char last_name[128] = "";
  unw_word_t last_off = 0;
  do {
    unw_word_t ip = 0, off = 0;
    if (unw_get_reg(c, UNW_REG_IP, &ip) < 0 || ip == 0) break;
    char name[128];
    if (unw_get_proc_name(c, name, sizeof name, &off) != 0) {
      Dl_info info;
      if (dladdr((void*)ip, &info) && info.dli_fname) {
        const char* base = strrchr(info.dli_fname, '/');
        rawfmt(name, sizeof name, "%s", base ? base + 1 : info.dli_fname);
        off = ip - (uintptr_t)info.dli_fbase;
      } else {
        rawfmt(name, sizeof name, "?");
        off = ip;
      }
    }
    demangle_lite(name, sizeof name);
    bool ours = dladdr_is_self(ip);
    if (ours) {
      // Remember the outermost goshim frame: the interposer the program called.
      memcpy(last_name, name, sizeof name);
      last_off = off;
      last_goshim = true;
      continue;
    }
    if (last_goshim) {
      len += rawfmt(out + len, size - len, "  %s+0x%lx\n", last_name, (unsigned long)last_off);
      last_goshim = false;
    }
    len += rawfmt(out + len, size - len, "  %s+0x%lx\n", name, (unsigned long)off);
    if (len + 1 >= size) break;
  } while (++frames < kMaxFrames && unw_step(c) > 0);
  if (last_goshim)
    len += rawfmt(out + len, size - len, "  %s+0x%lx\n", last_name, (unsigned long)last_off);
  return len;
}

// The context a parked G was switched out with (switch.S frame layout).
void saved_context(G* gp, ucontext_t* uc) {
  memset(uc, 0, sizeof *uc);
  arch::uc_from_frame(uc, gp->sched_sp);
}

// The user-space stack and instruction pointers of kernel thread tid while
// it is inside a system call (/proc/self/task/TID/syscall); false if it is
// running (or the file cannot be read). The system call number in *nr.
bool in_syscall(pid_t tid, uintptr_t* sp, uintptr_t* pc, long* nr) {
  char path[64], buf[256];
  rawfmt(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
  if (privfd_read(path, buf, sizeof buf) <= 0) return false;
  if (buf[0] < '0' || buf[0] > '9') return false;  // "running" (or "-1": not in a syscall)
  // "NR a1 a2 a3 a4 a5 a6 SP PC"
  char* p = buf;
  uintptr_t v[9];
  for (int i = 0; i < 9; i++) {
    v[i] = strtoul(p, &p, 0);
    while (*p == ' ') p++;
  }
  *nr = (long)v[0];
  *sp = v[7];
  *pc = v[8];
  return *sp && *pc;
}

// Reads n bytes at addr of this process without faulting
// (process_vm_readv: an unmapped or unreadable address is an error, not a
// signal). The words a stack scan looks at are whatever the program left
// on its stack.
bool read_quiet(uintptr_t addr, void* out, size_t n) {
  return sys::read_self(out, (const void*)addr, n);
}

// Whether ra looks like a return address: the bytes before it are a call
// (call rel32, or call through a register or memory operand).
bool after_call(uintptr_t ra) {
  if (ra < 4096) return false;
  uint8_t p[7];  // the 7 bytes before ra: p[7 - len] is ra - len
  if (!read_quiet(ra - 7, p, sizeof p)) return false;
  if (p[7 - 5] == 0xE8) return true;
  for (int len : {2, 3, 4, 6, 7})
    if (p[7 - len] == 0xFF && ((p[7 - len + 1] >> 3) & 7) == 2) return true;
  return false;
}

// The frame pointer of a thread stopped in a system call, which
// /proc/self/task/TID/syscall does not give: the innermost frame record
// (saved frame pointer above it on the stack, then a return address) at or
// above sp. Frames whose unwind rules use the frame pointer (-O0 code)
// need it; others ignore it. 0 if none is found below hi. Never faults:
// every word is read with read_quiet (the stack holds the program's
// values; a pair that looked like a frame record with a "return address"
// in an unmapped page crashed the dump: the fault guard is not a design).
uintptr_t guess_frame_pointer(uintptr_t sp, uintptr_t hi) {
  for (uintptr_t a = sp; a + 16 <= hi && a < sp + 64 * 1024; a += 8) {
    uintptr_t rec[2];
    if (!read_quiet(a, rec, sizeof rec)) return 0;
    uintptr_t saved = rec[0];
    if (saved > a && saved < hi && (saved & 7) == 0 && after_call(rec[1])) return a;
  }
  return 0;
}

void write_all(int fd, const char* s, size_t n) {
  while (n > 0) {
    long w = sys::write(fd, s, n);
    if (w == -4) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

void state_of(G* gp, char* out, size_t size) {
  GStatus st = gp->status.load(std::memory_order_acquire);
  int64_t waited = gp->waitsince ? (sys::coarsetime() - gp->waitsince) / 1000000 : 0;
  switch (st) {
    case GStatus::Running:
      rawfmt(out, size, "running on M%d", gp->m ? gp->m->id : -1);
      break;
    case GStatus::Runnable:
      rawfmt(out, size, "runnable");
      break;
    case GStatus::Syscall:
      rawfmt(out, size, "blocking call %s, %ld ms", gp->blocking_what ? gp->blocking_what : "?",
             (long)((sys::coarsetime() - gp->syscall_since) / 1000000));
      break;
    case GStatus::Waiting: {
      const char* r = wait_reason_name(gp->waitreason);
      bool is_fd = gp->waitreason == WaitReason::IORead || gp->waitreason == WaitReason::IOWrite ||
                   gp->waitreason == WaitReason::Accept || gp->waitreason == WaitReason::Connect;
      if (is_fd)
        rawfmt(out, size, "%s, fd %ld, %ld ms", r, (long)(intptr_t)gp->waitobj, (long)waited);
      else if (gp->waitobj)
        rawfmt(out, size, "%s %p, %ld ms", r, gp->waitobj, (long)waited);
      else
        rawfmt(out, size, "%s, %ld ms", r, (long)waited);
      if (gp->timer.heap.load(std::memory_order_relaxed)) {
        size_t l = strlen(out);
        rawfmt(out + l, size - l, ", with timeout");
      }
      break;
    }
    case GStatus::Dead:
      rawfmt(out, size, "dead (not joined)");
      break;
    default:
      rawfmt(out, size, "?");
  }
}

void dump_one(int fd, G* gp) {
  static char buf[8192];
  char state[160];
  state_of(gp, state, sizeof state);
  size_t len = rawfmt(buf, sizeof buf, "goroutine %lu [%s]", (unsigned long)gp->goid, state);
  if (gp->name[0]) len += rawfmt(buf + len, sizeof buf - len, " \"%s\"", gp->name);
  // Signals recorded on the G and not yet delivered (bit n-1 for signal n):
  // what a G that should have run a handler still carries.
  uint64_t pend = gp->sigpending.load(std::memory_order_relaxed) |
                  gp->sigpending_proc.load(std::memory_order_relaxed);
  if (pend)
    len += rawfmt(buf + len, sizeof buf - len, " [signals pending 0x%lx, blocked 0x%lx]", (unsigned long)pend,
                  (unsigned long)gp->sigmask);
  len += rawfmt(buf + len, sizeof buf - len, ":\n");
  GStatus st = gp->status.load(std::memory_order_acquire);
  uintptr_t ksp = 0, kpc = 0;
  long nr = 0;
  M* gm = gp->m;
  if ((st == GStatus::Running || st == GStatus::Syscall) && gm && gm->tid > 0 &&
      in_syscall(gm->tid, &ksp, &kpc, &nr)) {
    // Asleep in the kernel: its user stack does not move; unwind from the
    // system call's return point without disturbing it.
    len += rawfmt(buf + len, sizeof buf - len, "  [in system call %ld]\n", nr);
    ucontext_t uc;
    memset(&uc, 0, sizeof uc);
    arch::uc_set_pc(&uc, kpc);
    arch::uc_set_sp(&uc, ksp);
    guard_tid.store(sys::gettid(), std::memory_order_release);
    if (sigsetjmp(guard_buf, 1) == 0) {
      uintptr_t hi = gp->stack.hi > ksp ? gp->stack.hi : ksp + 1024 * 1024;
      arch::uc_set_fp(&uc, guess_frame_pointer(ksp, hi));
      unw_cursor_t c;
      if (unw_init_local(&c, (unw_context_t*)&uc) == 0)
        len += unwind_into(&c, buf + len, sizeof buf - len);
    } else {
      len += rawfmt(buf + len, sizeof buf - len, "  <stack changed while it was read>\n");
    }
    guard_tid.store(0, std::memory_order_release);
  } else if (st == GStatus::Running || st == GStatus::Syscall) {
    M* mp = gp->m;
    M* me = tls_g ? tls_g->m : nullptr;
    if (mp && mp->tid > 0 && mp != me) {
      running_done.store(0, std::memory_order_relaxed);
      running_buf[0] = 0;
      running_target.store(gp, std::memory_order_release);
      preempt_dump_kick(gp);
      for (int i = 0; i < 200 && !running_done.load(std::memory_order_acquire); i++) {
        struct timespec ts = {0, 250000};
        sys::nanosleep(&ts, nullptr);
      }
      G* want = gp;
      if (!running_target.compare_exchange_strong(want, nullptr, std::memory_order_acq_rel)) {
        // Claimed by its M: the answer is being written; it finishes
        // (a bounded unwind on a running thread).
        while (!running_done.load(std::memory_order_acquire)) sys::sched_yield();
        running_target.store(nullptr, std::memory_order_release);
      }
      if (running_done.load(std::memory_order_acquire))
        len += rawfmt(buf + len, sizeof buf - len, "%s", running_buf);
      else
        len += rawfmt(buf + len, sizeof buf - len, "  (no backtrace: its thread did not answer)\n");
    } else {
      len += rawfmt(buf + len, sizeof buf - len, "  (the dumping goroutine)\n");
    }
  } else if ((st == GStatus::Waiting || st == GStatus::Runnable) && gp->sched_sp) {
    ucontext_t uc;
    saved_context(gp, &uc);
    guard_tid.store(sys::gettid(), std::memory_order_release);
    if (sigsetjmp(guard_buf, 1) == 0) {
      unw_cursor_t c;
      if (unw_init_local(&c, (unw_context_t*)&uc) == 0)
        len += unwind_into(&c, buf + len, sizeof buf - len);
    } else {
      len += rawfmt(buf + len, sizeof buf - len, "  <stack changed while it was read>\n");
    }
    guard_tid.store(0, std::memory_order_release);
  }
  if (gp->creator_goid)
    len += rawfmt(buf + len, sizeof buf - len, "created by goroutine %lu\n",
                  (unsigned long)gp->creator_goid);
  len += rawfmt(buf + len, sizeof buf - len, "\n");
  write_all(fd, buf, len < sizeof buf ? len : sizeof buf - 1);
}

}  // namespace

// Whether pc is in libgoshim's own code.
bool dladdr_is_self(uintptr_t pc) {
  static struct {
    uintptr_t base, lo, hi;
  } self;
  if (!self.hi) {
    Dl_info info;
    if (!dladdr((void*)&dladdr_is_self, &info)) return false;
    self.base = (uintptr_t)info.dli_fbase;
    dl_iterate_phdr(
        [](struct dl_phdr_info* di, size_t, void* data) -> int {
          auto* s = (decltype(self)*)data;
          if (di->dlpi_addr != s->base) return 0;
          for (int i = 0; i < di->dlpi_phnum; i++) {
            const ElfW(Phdr)& ph = di->dlpi_phdr[i];
            if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
              s->lo = di->dlpi_addr + ph.p_vaddr;
              s->hi = s->lo + ph.p_memsz;
            }
          }
          return 1;
        },
        &self);
  }
  return pc >= self.lo && pc < self.hi;
}

// The fault guard: called from signal_handler for SIGSEGV/SIGBUS.
bool dump_fault_guard() {
  long tid = guard_tid.load(std::memory_order_acquire);
  if (tid == 0 || tid != sys::gettid()) return false;
  guard_tid.store(0, std::memory_order_relaxed);
  siglongjmp(guard_buf, 1);
}

void dump_capture_running(G* gp, void* ucontext) {
  // Only the request for gp still outstanding. (The fault guard belongs to
  // the dumping thread: this handler used to clear it, so that a late
  // answer disarmed the guard of the dumper's next stack read, which then
  // crashed the program on a fault.)
  G* want = gp;
  if (!running_target.compare_exchange_strong(want, kClaimed, std::memory_order_acq_rel)) return;
  dump_unwinder_init();  // done by the dumper already (dump_goroutines)
  unw_cursor_t c;
  size_t len = 0;
  {
    // libunwind calls libc's read, write and open (its address check
    // through a pipe, /proc/self/maps), cancellation points: never act on
    // gp's cancellation in this handler, wherever the signal landed (a sema
    // bucket lock held: cancel_async_race hung in Debian 13).
    CancelOff off;
    if (unw_init_local2(&c, (unw_context_t*)ucontext, UNW_INIT_SIGNAL_FRAME) == 0)
      len = unwind_into(&c, running_buf, sizeof running_buf);
  }
  running_buf[len < sizeof running_buf ? len : sizeof running_buf - 1] = 0;
  running_done.store(1, std::memory_order_release);
  // An asynchronous cancellation sent during the walk sent no signal: gp
  // acts on it at its next safe point.
  if (cancel_async_pending(gp)) gp->preempt.store(true, std::memory_order_release);
}

bool dump_program_frame_first(G* gp, void* ucontext) {
  // Set up by cancel_send before any cancellation could bring a G here;
  // else now, as libunwind would itself.
  dump_unwinder_init();
  constexpr int kMaxCancelFrames = 32;
  bool program = false;
  gp->insig++;  // libunwind's own libc calls (sigprocmask) go straight to libc
  CancelOff off;  // and never act on gp's pending cancellation
  unw_cursor_t c;
  if (unw_init_local2(&c, (unw_context_t*)ucontext, UNW_INIT_SIGNAL_FRAME) == 0) {
    for (int frames = 0; frames < kMaxCancelFrames; frames++) {
      unw_word_t ip = 0;
      if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0) break;
      if (dladdr_is_self(ip)) break;  // goshim's code called what was interrupted
      if (!pc_unsafe(ip)) {
        program = true;  // the program's own code called it
        break;
      }
      if (unw_step(&c) <= 0) break;
    }
  }
  gp->insig--;
  return program;
}

void dump_backtrace(int fd, G* gp, void* uc) {
  dump_unwinder_init();
  static char buf[4096];
  size_t len = 0;
  CancelOff off;  // libunwind's read/open/write never act on the caller's cancellation
  unw_cursor_t c;
  if (uc) {
    if (unw_init_local2(&c, (unw_context_t*)uc, UNW_INIT_SIGNAL_FRAME) == 0)
      len = unwind_into(&c, buf, sizeof buf);
  } else if (gp && gp->sched_sp) {
    ucontext_t u;
    saved_context(gp, &u);
    if (unw_init_local(&c, (unw_context_t*)&u) == 0) len = unwind_into(&c, buf, sizeof buf);
  }
  write_all(fd, buf, len);
}

void dump_backtrace_here(int fd, int skip) {
  dump_unwinder_init();
  static char buf[4096];
  CancelOff off;  // (the lock-order checker's report, about to abort, on any G)
  unw_context_t ctx;
  unw_cursor_t c;
  unw_getcontext(&ctx);
  if (unw_init_local(&c, &ctx) != 0) return;
  for (int i = 0; i < skip; i++)
    if (unw_step(&c) <= 0) return;
  size_t len = unwind_into(&c, buf, sizeof buf);
  write_all(fd, buf, len);
}

void dump_goroutine(int fd, G* gp) {
  dump_unwinder_init();
  dump_one(fd, gp);
}

void dump_goroutines(int fd, const char* title) {
  dump_unwinder_init();
  char head[160];
  size_t n = rawfmt(head, sizeof head, "%s\n\n", title);
  write_all(fd, head, n);
  G* g1 = main_g();
  if (g1->status.load() != GStatus::Idle) dump_one(fd, g1);
  size_t slots = arena_nslots();
  for (size_t i = 0; i < slots; i++) {
    G* gp = arena_slot_g(i);
    if (gp->magic != kGMagic) continue;
    GStatus st = gp->status.load(std::memory_order_acquire);
    if (st == GStatus::Idle) continue;
    dump_one(fd, gp);
  }
}

namespace {
// The unwinder's set-up (dump_unwinder_init): 0 not done, 1 under way, 2 done.
std::atomic<int> unwinder_state{0};
}  // namespace

void dump_unwinder_init() {
  int s = unwinder_state.load(std::memory_order_acquire);
  if (s == 2) return;
  if (s == 0 && unwinder_state.compare_exchange_strong(s, 1, std::memory_order_acq_rel)) {
    // libunwind sets itself up on first use (reading the process's maps):
    // do it here, not later inside a signal handler on a busy thread.
    // No cache: libunwind's cache lock would block every signal around each
    // step with sigprocmask (goshim's own, interposed).
    // Its set-up makes a pipe (memory validation): goshim's own fd, not the
    // program's (core/ownfd.hpp).
    ownfd_capture_begin();
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_NONE);
    unw_context_t ctx;
    unw_cursor_t c;
    unw_getcontext(&ctx);
    // Not unw_get_proc_name: it keeps nothing between calls (each maps and
    // reads the object's symbol table again), and warming it read all of
    // libgoshim.so's symbols at every process start (0.7-1.2 ms of CPU).
    if (unw_init_local(&c, &ctx) == 0) unw_step(&c);
    ownfd_capture_end();
    unwinder_state.store(2, std::memory_order_release);
    return;
  }
  while (unwinder_state.load(std::memory_order_acquire) != 2) sys::sched_yield();
}

void dump_init() {
  // dladdr takes ld.so's lock: look goshim's range up now, never first in a
  // signal handler (preempt.cpp's safe-point checks).
  dladdr_is_self((uintptr_t)&dump_init);
}

void dump_request() {
  requested.store(true, std::memory_order_release);
  sysmon_wake();
}

bool dump_requested() { return requested.exchange(false, std::memory_order_acq_rel); }

}  // namespace goshim
