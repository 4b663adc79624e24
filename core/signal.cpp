// Signals under M:N (see signal.hpp).
//
// Contracts: signal_handler is the kernel-level handler and is
// signal-safe: it takes no runtime lock and allocates nothing; anything
// that needs locks (waking a parked G) is left to sysmon (signal_route).
#include "core/contract.hpp"
#include "core/scstore.hpp"
#include "core/signal.hpp"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/ucontext.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1U << 31)
#endif

#include "arch/arch.hpp"
#include "core/cancelproto.hpp"
#include "core/config.hpp"
#include "core/dump.hpp"
#include "core/jemalloc_glue.hpp"
#include "core/jmpbuf.hpp"
#include "core/preempt.hpp"
#include "core/privfd.hpp"
#include "core/proc.hpp"
#include "core/procstatus.hpp"
#include "core/rawlog.hpp"
#include "core/real.hpp"
#include "core/sched.hpp"
#include "core/sema.hpp"
#include "core/sysmon.hpp"
#include "core/tls.hpp"
#include "syscalls/sys.hpp"

#ifndef SYS_rt_tgsigqueueinfo
#define SYS_rt_tgsigqueueinfo 297
#endif

namespace goshim {

// Program handlers run on a kernel thread that is not a goroutine's M
// (a foreign thread), and kt_nhandled after the last one without
// SA_RESTART (as G::nhandled and G::last_norestart): the fd layer's
// emulated blocking waits (poll, which never restarts) decide between
// EINTR and a restart from them, as the kernel decides for a blocking
// read (signal_thread_restart_since). Per kernel thread; a foreign thread
// never runs a G.
__thread uint32_t kt_nhandled __attribute__((tls_model("initial-exec"))) = 0;
__thread uint32_t kt_last_norestart __attribute__((tls_model("initial-exec"))) = 0;

void sysmon_wake();  // sysmon.cpp

namespace {

constexpr int kSigCancel = 32;
constexpr int kSigSetxid = 33;
constexpr uintptr_t kHandlerDfl = 0;
constexpr uintptr_t kHandlerIgn = 1;
constexpr unsigned long kSaRestorer = 0x04000000;

inline uint64_t bit(int sig) { return 1ull << (sig - 1); }

// Bytes left above a G's guard, below a handler frame moved onto its
// stack, for goshim's own frames there when it switches the G out, runs
// a delivery or unwinds (sigstack_move); a quarter of it in front of a
// program handler.
constexpr uintptr_t kSigframeReserve = 4096;

// The program's disposition of each signal, readable from a handler.
std::atomic<uintptr_t> prog_handler[65];
// The dump signal was ignored when the process started (a shell ignores
// SIGQUIT for background jobs) and the program has not set it since: dump
// anyway, as Go does; only the program's own SIG_IGN or handler stops it.
std::atomic<bool> dump_sig_inherited_ign{false};
std::atomic<int> prog_flags[65];
std::atomic<uint64_t> prog_mask[65];
std::atomic<bool> known[65];       // prog_* holds the program's disposition
std::atomic<bool> kwrapped[65];    // the kernel runs signal_handler for it
std::atomic<uint64_t> wrapped_bits{0};  // the same, as a set

// Signal-safe.
void set_wrapped(int sig, bool on) {
  if (on) {
    kwrapped[sig].store(true, std::memory_order_release);
    wrapped_bits.fetch_or(1ull << (sig - 1), std::memory_order_relaxed);
  } else {
    kwrapped[sig].store(false, std::memory_order_relaxed);
    wrapped_bits.fetch_and(~(1ull << (sig - 1)), std::memory_order_relaxed);
  }
}
SpinLock action_lock;              // serializes signal_action (not taken by handlers)

// Signals goshim holds for the process (delivered to g0, an idle M or
// sysmon, or blocked by the G they hit). A bit of proc_pending says that
// held[sig] has an instance for a G to claim; a G that claims it (its
// sigpending_proc bit) takes the instance from held[sig] when it delivers
// or sigwaits, and hands the bit back if more are queued.
std::atomic<uint64_t> proc_pending{0};

// The held instances of one signal, oldest first: a bounded lock-free ring
// (Vyukov's MPMC queue). Producers are signal handlers (defer), consumers
// Gs and sysmon. Signal-safe: no lock, no allocation; a producer
// interrupted between claiming a cell and publishing it (by a nested
// handler, or descheduled) only makes consumers see the queue end there
// until it publishes, and it sets the proc_pending bit itself afterwards:
// nobody ever waits for another thread. A cell's stored sequence is
// (Vyukov's sequence - its index), so that zero-initialized memory is an
// empty queue.
template <uint32_t Cap>
struct HeldQueue {
  static_assert((Cap & (Cap - 1)) == 0 && Cap >= 2, "a power of two");
  std::atomic<uint32_t> enq{0};
  std::atomic<uint32_t> deq{0};
  struct Cell {
    std::atomic<uint32_t> seq{0};
    siginfo_t info;
  } cells[Cap];

  bool push(const siginfo_t* si) {
    uint32_t pos = enq.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells[pos & (Cap - 1)];
      uint32_t seq = c.seq.load(std::memory_order_acquire) + (pos & (Cap - 1));
      int32_t d = (int32_t)(seq - pos);
      if (d == 0) {
        if (enq.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.info = *si;
          c.seq.store(pos + 1 - (pos & (Cap - 1)), std::memory_order_release);
          return true;
        }
      } else if (d < 0) {
        return false;  // full
      } else {
        pos = enq.load(std::memory_order_relaxed);
      }
    }
  }
  bool pop(siginfo_t* out) {
    uint32_t pos = deq.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells[pos & (Cap - 1)];
      uint32_t seq = c.seq.load(std::memory_order_acquire) + (pos & (Cap - 1));
      int32_t d = (int32_t)(seq - (pos + 1));
      if (d == 0) {
        if (deq.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          *out = c.info;
          c.seq.store(pos + Cap - (pos & (Cap - 1)), std::memory_order_release);
          return true;
        }
      } else if (d < 0) {
        return false;  // empty (or the next one is not published yet)
      } else {
        pos = deq.load(std::memory_order_relaxed);
      }
    }
  }
  bool empty() {
    uint32_t pos = deq.load(std::memory_order_acquire);
    const Cell& c = cells[pos & (Cap - 1)];
    return c.seq.load(std::memory_order_acquire) + (pos & (Cap - 1)) != pos + 1;
  }
  void reset() {
    enq.store(0, std::memory_order_relaxed);
    deq.store(0, std::memory_order_relaxed);
    for (auto& c : cells) c.seq.store(0, std::memory_order_relaxed);
  }
};

constexpr int kSigRtMin = 32;  // the kernel's SIGRTMIN (glibc keeps 32 and 33)
HeldQueue<2> held_std[kSigRtMin];  // 1..31

// Every queued instance goshim holds, as the kernel's sigqueue entries:
// real-time process signals (owner kProcOwner) and thread-directed signals
// queued on a G (owner the G, with its goid: a node left by an earlier
// thread on a reused G descriptor is garbage). One pool for the process.
// Natively each of them would be an entry in the kernel's queue, counted
// against RLIMIT_SIGPENDING with the user's others: a new one that goshim
// queues itself (a thread-directed send to a G) is checked against the
// limit as the kernel would check it (sigpending_room_for, below); one the
// kernel already accepted (a process signal goshim took from it) is kept.
// The nodes are reserved at init (MAP_NORESERVE; pages never used are
// never touched), as many as the hard limit allows the soft one to reach
// (at least 1024, at most 2^20); past that a new instance is refused, an
// accepted one dropped.
//
// Signal-safe and lock-free: producers are senders on any thread,
// including signal handlers; consumers are Gs, senders forwarding to a
// running G, and sysmon. A node is claimed by a CAS 0 -> 1, filled, then
// published (2); a consumer claims a published node 2 -> 3, copies it and
// frees it (0). The oldest instance is the lowest ticket. A producer
// interrupted while it fills a node only hides that node until it
// publishes it (and sets the pending bit after that).
struct SigNode {
  std::atomic<uint32_t> state;
  uint32_t ticket;
  uintptr_t owner;
  uint64_t goid;
  int sig;
  siginfo_t info;
};
constexpr uintptr_t kProcOwner = 1;
SigNode* pool;
uint32_t pool_cap;    // nodes reserved
std::atomic<uint32_t> pool_hwm{0};   // nodes [0, hwm) may be in use
std::atomic<uint32_t> pool_used{0};  // nodes in use
std::atomic<uint32_t> sig_ticket{0};

void pool_init() {
  struct {
    uint64_t cur, max;
  } rl = {0, 0};
  if (sys::raw4(SYS_prlimit64, 0, RLIMIT_SIGPENDING, 0, (long)&rl) != 0) rl.cur = rl.max = 1024;
  uint64_t cap = rl.max < 1024 ? 1024 : rl.max;
  if (cap > (1u << 20)) cap = 1u << 20;
  void* m = sys::mmap(nullptr, cap * sizeof(SigNode), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) fatal("cannot reserve the signal queue");
  // Up to ~170 MB, nearly all never touched: out of core dumps.
  sys::madvise(m, cap * sizeof(SigNode), MADV_DONTDUMP);
  pool = (SigNode*)m;
  pool_cap = (uint32_t)cap;
}

bool node_live(const SigNode& n) {
  if (n.owner == kProcOwner) return true;
  return ((G*)n.owner)->goid == n.goid;
}

void node_free(SigNode& n) {
  n.state.store(0, std::memory_order_release);
  pool_used.fetch_sub(1, std::memory_order_acq_rel);
}

bool sigpending_room_for(uint64_t extra);

// Signal-safe. Queues an instance; false if refused: the pool is full, or
// (limited: a new instance, not one the kernel accepted already) the
// user's count as the kernel would have it reached RLIMIT_SIGPENDING.
// front: ahead of every instance queued (a put-back of the oldest one).
bool pool_push(uintptr_t owner, uint64_t goid, int sig, const siginfo_t* si, bool front = false,
               bool limited = false) {
  if (!pool) return false;
  uint32_t u = pool_used.load(std::memory_order_relaxed);
  do {
    if (u >= pool_cap) return false;
  } while (!pool_used.compare_exchange_weak(u, u + 1, std::memory_order_acq_rel));
  // The node is reserved first, then the count (which includes it) is
  // checked: two senders racing for the last place do not both get it.
  if (limited && !sigpending_room_for(0)) {
    pool_used.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  for (;;) {
    uint32_t h = pool_hwm.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < h; i++) {
      SigNode& n = pool[i];
      uint32_t z = 0;
      if (n.state.load(std::memory_order_relaxed) != 0 ||
          !n.state.compare_exchange_strong(z, 1, std::memory_order_acquire))
        continue;
      n.owner = owner;
      n.goid = goid;
      n.sig = sig;
      n.info = *si;
      n.ticket = front ? sig_ticket.load(std::memory_order_relaxed) - 0x40000000u
                       : sig_ticket.fetch_add(1, std::memory_order_relaxed);
      n.state.store(2, std::memory_order_release);
      return true;
    }
    // used < cap: a free node exists, at worst past the high-water mark.
    if (h < pool_cap) pool_hwm.compare_exchange_strong(h, h + 1, std::memory_order_acq_rel);
  }
}

// Signal-safe. The oldest published instance of sig for owner, or null;
// frees garbage nodes met on the way.
SigNode* pool_find(uintptr_t owner, uint64_t goid, int sig) {
  SigNode* best = nullptr;
  uint32_t h = pool_hwm.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < h; i++) {
    SigNode& n = pool[i];
    if (n.state.load(std::memory_order_acquire) != 2) continue;
    if (!node_live(n)) {
      uint32_t two = 2;
      if (n.state.compare_exchange_strong(two, 3, std::memory_order_acquire)) node_free(n);
      continue;
    }
    if (n.owner != owner || n.goid != goid || n.sig != sig) continue;
    if (!best || (int32_t)(n.ticket - best->ticket) < 0) best = &n;
  }
  return best;
}

// Signal-safe. Takes the oldest instance of sig for owner.
bool pool_take(uintptr_t owner, uint64_t goid, int sig, siginfo_t* out) {
  for (;;) {
    SigNode* n = pool_find(owner, goid, sig);
    if (!n) return false;
    uint32_t two = 2;
    if (!n->state.compare_exchange_strong(two, 3, std::memory_order_acquire)) continue;
    // Claimed: it can no longer change under us.
    if (n->owner != owner || n->goid != goid || n->sig != sig) {
      n->state.store(2, std::memory_order_release);  // reused meanwhile: not ours
      continue;
    }
    *out = n->info;
    node_free(*n);
    return true;
  }
}

// Frees every instance queued on gp (its exit: a thread's pending signals
// go with it); with a goid, only that incarnation's.
void pool_drop(G* gp, uint64_t goid = 0) {
  uint32_t h = pool_hwm.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < h; i++) {
    SigNode& n = pool[i];
    if (n.state.load(std::memory_order_acquire) != 2 || n.owner != (uintptr_t)gp) continue;
    uint32_t two = 2;
    if (n.state.compare_exchange_strong(two, 3, std::memory_order_acquire)) {
      if (n.owner == (uintptr_t)gp && (!goid || n.goid == goid)) node_free(n);
      else n.state.store(2, std::memory_order_release);
    }
  }
}

void pool_reset() {
  uint32_t h = pool_hwm.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < h; i++) pool[i].state.store(0, std::memory_order_relaxed);
  pool_hwm.store(0, std::memory_order_relaxed);
  pool_used.store(0, std::memory_order_relaxed);
}

// Standard process signals held (held_std's instances): natively each is
// an entry of the kernel's queue, counted with the user's others.
std::atomic<uint32_t> held_std_n{0};

// As the kernel: a standard signal is pending once for the process (a
// second one sent while the first is pending is dropped, the first
// siginfo kept); every real-time one queues (the pool above).
// Signal-safe. Queues an instance of process signal sig; false if dropped.
bool held_push(int sig, const siginfo_t* si) {
  if (sig < kSigRtMin) {
    if (!held_std[sig].empty()) return false;  // coalesces
    if (!held_std[sig].push(si)) return false;
    held_std_n.fetch_add(1, std::memory_order_acq_rel);
    return true;
  }
  return pool_push(kProcOwner, 0, sig, si);
}

// Signal-safe. Takes the oldest held instance of sig.
bool held_pop(int sig, siginfo_t* out) {
  if (sig >= kSigRtMin) return pool_take(kProcOwner, 0, sig, out);
  if (!held_std[sig].pop(out)) return false;
  held_std_n.fetch_sub(1, std::memory_order_acq_rel);
  return true;
}

// ---- RLIMIT_SIGPENDING, as the kernel counts it ----
//
// The kernel (kernel/signal.c sig_get_ucounts / __sigqueue_alloc, 6.x)
// counts every queued entry against the receiving task's real user
// (ucounts, inc_rlimit_get_ucounts: all of that user's processes) and
// refuses a new one when the count would pass the receiving process's
// current soft limit: for goshim's instances the receiver is this process.
// Refused means EAGAIN for a real-time signal not sent by kill (SI_USER),
// and pending without its siginfo otherwise (a standard signal, or kill).
// An instance goshim holds was taken out of the kernel's count (or never
// entered it), so the kernel's count alone lets in more than natively:
// the rule kept is kernel count + held by goshim <= current soft limit.
//
// The kernel's count is SigQ's first number in /proc/self/status (a read
// of about 10-25 us, on the privfd thread); the limit is re-read each time
// (prlimit64: a change by setrlimit or prlimit, from this or another
// process, counts at once). The count read is reused while it cannot have
// grown enough to matter: every new entry of the user increments one
// shared counter (an atomic read-modify-write on one cache line, in a
// system call), so it grows by at most kSigqGrowthPerUs a microsecond
// whatever the machine; with the default limit (tens of thousands) one
// read serves for hundreds of microseconds of sends, near the limit every
// check reads it. goshim's own signals (the preemption signal, forwards,
// SIGCANCEL/SIGSETXID) never pass here: they go to the kernel as tgkill
// and are the kernel's business.
constexpr uint64_t kSigqGrowthPerUs = 100;
// The last count read and when (nanotime before the read), under a
// sequence word (odd while written; a writer that finds it odd does not
// write, a reader that does reads again from /proc).
std::atomic<uint32_t> sigq_seq{0};
std::atomic<uint64_t> sigq_count{0};
std::atomic<int64_t> sigq_at{0};

// Signal-safe. The calling process's soft RLIMIT_SIGPENDING now.
uint64_t sigpending_limit() {
  struct {
    uint64_t cur, max;
  } rl = {~0ull, ~0ull};
  if (sys::raw4(SYS_prlimit64, 0, RLIMIT_SIGPENDING, 0, (long)&rl) != 0) return ~0ull;
  return rl.cur;
}

// Signal-safe. The kernel's count of queued signals of this process's
// user (SigQ), or -1 if unreadable.
int64_t read_sigq() {
  StatusField f = {"SigQ", 10, 0, false};
  if (!proc_status("/proc/self/status", &f, 1) || !f.found) return -1;
  return (int64_t)f.value;
}

// Signal-safe. Which of bits are pending on the calling kernel thread
// itself (SigPnd), not on the process (rt_sigpending reports both, and
// rt_sigtimedwait takes the process's once the thread has none: a
// kill(getpid(), SIGPIPE) looks exactly like the kernel's own SIGPIPE for
// a write). If the status file cannot be read: unknown, the caller's
// guess.
uint64_t thread_private_pending(uint64_t bits, uint64_t unknown) {
  uint64_t v;
  if (!task_status(sys::gettid(), "SigPnd", 16, &v)) return unknown & bits;
  return v & bits;
}

// Signal-safe. Whether the instances goshim holds (pool and standard),
// plus extra more, fit with the kernel's count of the user's queued
// signals under the current soft limit.
bool sigpending_room_for(uint64_t extra) {
  uint64_t held = pool_used.load(std::memory_order_acquire) + held_std_n.load(std::memory_order_acquire) + extra;
  uint64_t lim = sigpending_limit();
  if (lim == ~0ull) return true;  // RLIM_INFINITY
  if (held > lim) return false;
  int64_t now = sys::nanotime();
  uint32_t q = sigq_seq.load(std::memory_order_acquire);
  if (!(q & 1)) {
    uint64_t k = sigq_count.load(std::memory_order_acquire);
    int64_t at = sigq_at.load(std::memory_order_acquire);
    if (at && sigq_seq.load(std::memory_order_acquire) == q && now >= at) {
      uint64_t grown = ((uint64_t)(now - at) / 1000 + 1) * kSigqGrowthPerUs;
      if (k + grown + held <= lim) return true;
    }
  }
  int64_t k = read_sigq();
  if (k < 0) return true;  // unknown: the pool's own bound only
  q = sigq_seq.load(std::memory_order_acquire);
  if (!(q & 1) && sigq_seq.compare_exchange_strong(q, q + 1, std::memory_order_acq_rel)) {
    sigq_count.store((uint64_t)k, std::memory_order_release);
    sigq_at.store(now, std::memory_order_release);
    sigq_seq.store(q + 2, std::memory_order_release);
  }
  return (uint64_t)k + held <= lim;
}

bool held_empty(int sig) {
  return sig < kSigRtMin ? held_std[sig].empty() : pool_find(kProcOwner, 0, sig) == nullptr;
}
// Some G got a pending signal while not running: sysmon looks for parked Gs
// with deliverable signals and wakes them.
std::atomic<bool> g_unrouted{false};
// Signals some G waits for in sigwait/sigsuspend: sysmon keeps them, and
// the handled ones, unblocked so that it can receive them.
std::atomic<uint64_t> handled_mask{0};
std::atomic<uint64_t> waited_mask{0};
std::atomic<uint64_t> mask_gen{0};


// The signal that asks for a goroutine dump while the program leaves it
// at its default action (SIGQUIT unless GOSHIM_DEBUG=dumpsignal=SIG).
int dump_signal() { return config.dump_signal ? config.dump_signal : SIGQUIT; }

uint64_t internal_mask() {
  uint64_t m = bit(kSigCancel) | bit(kSigSetxid);
  if (config.preempt_signal) m |= bit(config.preempt_signal);
  return m;
}

// What the kernel mask of an M running a G with program mask m must be.
inline uint64_t kmask(uint64_t m) { return m & ~internal_mask(); }

// Forwards. A signal for a G that runs (or is in a blocking call) goes to
// its M with tgkill, after a mark (M::sigfwd) that tells the handler which
// G it is for. By the time it arrives the G may have left that M, and the
// M may run another G that blocks the signal, or sleep idle with the
// signals sysmon takes blocked: the kernel would then keep the forward
// pending on that thread for as long as its mask blocks it, while the G it
// is for waits for it (sigsuspend, sigwait: a hang). So an M's kernel mask
// never blocks a signal whose mark is set (M::fwd_bits); the handler routes
// a forward to its G wherever it lands (g0, another G). Dekker with the
// sender (send_to_running): it sets the bit, then checks that the G is
// still on the M (G::m) before the tgkill; the M clears G::m when the G
// leaves it, then reads the bits at its next mask change (set_kmask).
// The G itself may block the signal meanwhile on the same M: the forward
// then waits in the kernel until the G opens it or leaves the M.
// The kernel may deliver the tgkill without its siginfo: when it cannot
// queue one (the user's RLIMIT_SIGPENDING count reached, or no memory) a
// standard signal still arrives, as SI_USER from pid 0 (kernel/signal.c,
// "silent loss of information"; a real-time one is refused, EAGAIN). The
// mark says what it is then (lost_info), and the G it was for gets it with
// the siginfo the kernel gave, as natively the thread a pthread_kill or
// pthread_sigqueue reached would. Taken for a signal of its own (sent to
// the process), it ran the program's handler on whatever G the M ran:
// tests/preload/signals_kill_exact.
// Signal-safe. The kernel mask for mp given the mask k it should have.
inline uint64_t with_fwd(M* mp, uint64_t k) {
  return k & ~mp->fwd_bits.fetch_or(0, std::memory_order_seq_cst);
}
extern std::atomic<uint64_t> sysmon_leaves;
extern std::atomic<uint64_t> sysmon_leaves_gen;
extern std::atomic<uint64_t> sysmon_open;
extern std::atomic<uint64_t> sysmon_closed_by_ms;

// Signal-safe. What sysmon leaves to an M whose kernel mask opens it
// (sysmon_leaves), as of generation gen of the dispositions and waits
// (mask_gen): sysmon computes it at its looks (signal_route), from the
// handled, wrapped and waited signals it saw then. A signal handled or
// blocked since (sigaction, pthread_sigmask's ensure_wrapped) was not
// leavable at that look, yet sysmon's kernel mask may leave it open
// already (a signal whose default action ends the process is open there
// unless every G blocks it), and sysmon takes it from the kernel until its
// next look: until that look everything sysmon may leave open counts.
inline uint64_t sysmon_leaves_since(uint64_t gen) {
  if (sysmon_leaves_gen.load(std::memory_order_seq_cst) < gen) return sysmon_open.load(std::memory_order_seq_cst);
  return sysmon_leaves.load(std::memory_order_seq_cst);
}

void hand_stale_raised(M* mp, uint64_t opens);

// Sets mp's kernel mask (the calling thread's) to k, minus the forwards
// in flight to it. runs: the G that runs on mp under k (null: g0, an idle
// M), the owner of a SIGPIPE or SIGXFSZ the kernel raises on mp while k
// blocks it ("Signals raised by a call").
inline void set_kmask(M* mp, uint64_t k, G* runs = nullptr) {
  k = with_fwd(mp, k);
  if (mp->cur_sigmask != k) {
    // (Not a forward's signal: its mark routes that instance.)
    if (uint64_t opens = mp->cur_sigmask & ~k & kSigRaisedByCall &
                         ~mp->fwd_bits.load(std::memory_order_seq_cst))
      hand_stale_raised(mp, opens);
    sys::rt_sigprocmask(SIG_SETMASK, &k, nullptr, 8);
    __atomic_store_n(&mp->cur_sigmask, k, __ATOMIC_RELEASE);
    // sysmon leaves what this M opens to it ("The kernel's order across
    // takers"): it looks now rather than at its next nap's end.
    if (~k & sysmon_leaves_since(mask_gen.load(std::memory_order_acquire))) sysmon_wake();
  }
  if (runs && (k & kSigRaisedByCall)) {
    mp->raised_owner = runs;
    mp->raised_goid = runs->goid;
  }
  m_progress(mp);
}
// Signal-safe. si is a signal without its siginfo: what the kernel hands
// over when it could not queue the sender's (SI_USER, pid 0). The sender
// is unknown; a forward's mark or a kick's record on the M says whether
// goshim sent it.
inline bool lost_info(const siginfo_t* si) { return si && si->si_code == SI_USER && si->si_pid == 0; }
// Signal-safe. The handler consumed mp's mark for sig: clears its bit (set
// again if a new mark came meanwhile).
inline void fwd_clear(M* mp, int sig) {
  uint64_t b = 1ull << (sig - 1);
  mp->fwd_bits.fetch_and(~b, std::memory_order_seq_cst);
  if (mp->sigfwd[sig].load(std::memory_order_seq_cst) != nullptr)
    mp->fwd_bits.fetch_or(b, std::memory_order_seq_cst);
}

bool default_ignored(int sig) {
  return sig == SIGCHLD || sig == SIGURG || sig == SIGWINCH || sig == SIGCONT;
}

// The program left sig at a default action that ends the process.
bool terminates_by_default(int sig) {
  if (prog_handler[sig].load(std::memory_order_acquire) != kHandlerDfl) return false;
  if (default_ignored(sig)) return false;
  return sig != SIGSTOP && sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU;
}

// The signals whose disposition now is a default action that ends the
// process (terminates_by_default).
uint64_t fatal_now() {
  uint64_t fatal = 0;
  for (int sig = 1; sig <= 64; sig++)
    if (terminates_by_default(sig)) fatal |= bit(sig);
  return fatal;
}

// A fault the kernel raises for the instruction being executed: it belongs
// to this G whatever its mask says.
bool synchronous(int sig, const siginfo_t* si) {
  return (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP ||
          sig == SIGSYS) &&
         si && si->si_code > 0;
}

uint64_t to_bits(const sigset_t* s) {
  uint64_t v;
  memcpy(&v, s, sizeof v);
  return v;
}

void from_bits(uint64_t v, sigset_t* s) {
  sigemptyset(s);
  memcpy(s, &v, sizeof v);
}


void tkill_info(siginfo_t* si, int sig) {
  memset(si, 0, sizeof *si);
  si->si_signo = sig;
  si->si_code = SI_TKILL;
  si->si_pid = (pid_t)sys::getpid();
  si->si_uid = getuid();
}

extern std::atomic<uint64_t> sysmon_hold;
inline bool sysmon_hold_has(int sig) { return sysmon_hold.load(std::memory_order_seq_cst) & bit(sig); }

// Signal-safe. Keeps a process signal for sysmon to route.
void defer(int sig, const siginfo_t* si) {
  siginfo_t tmp;
  if (!si) {
    tkill_info(&tmp, sig);
    si = &tmp;
  }
  held_push(sig, si);  // dropped: a standard signal already held, or a full queue
  proc_pending.fetch_or(bit(sig), std::memory_order_acq_rel);
  sysmon_wake();
}

// Signal-safe. gp claimed process signal sig (its sigpending_proc bit):
// takes the oldest held instance. If more are held, the next one is
// claimed again: by gp itself when again_self (it delivers them in order,
// as the kernel would to the thread that unblocked them), else by whoever
// sysmon routes it to. False if another G took the instance first.
bool take_held(G* gp, int sig, siginfo_t* out, bool again_self) {
  if (!held_pop(sig, out)) return false;
  if (sysmon_hold_has(sig)) sysmon_wake();  // it may take the next one (signal_route)
  if (!held_empty(sig)) {
    uint64_t b = bit(sig);
    if (again_self) {
      gp->sigpending_proc.fetch_or(b, std::memory_order_acq_rel);
      gp->sigpending.fetch_or(b, std::memory_order_acq_rel);
    } else {
      proc_pending.fetch_or(b, std::memory_order_acq_rel);
      sysmon_wake();
    }
  }
  return true;
}

void drop_kernel_dup(G* gp, int sig);
void sysmon_sync(M* self, uint64_t set, bool exact = false);
extern std::atomic<int32_t> std_taking[];

// Signal-safe. take_held, and for a standard signal the merge of what was
// sent while goshim held the instance taken: an instance the kernel still
// has (sysmon, holding that signal, keeps it blocked meanwhile: std_taking)
// and one another thread took from the kernel before this point (sysmon
// or an M on g0, sysmon_sync): natively each found the signal pending and
// was dropped.
bool take_proc(G* gp, int sig, siginfo_t* out, bool again_self) {
  if (sig >= kSigRtMin) return take_held(gp, sig, out, again_self);
  std_taking[sig].fetch_add(1, std::memory_order_seq_cst);
  bool r = take_held(gp, sig, out, again_self);
  if (r) {
    sysmon_sync(gp->m, bit(sig));
    drop_kernel_dup(gp, sig);
    siginfo_t dup;
    while (held_pop(sig, &dup)) {
    }
  }
  std_taking[sig].fetch_sub(1, std::memory_order_seq_cst);
  if (sysmon_hold_has(sig)) sysmon_wake();
  return r;
}

// Whether sig's default action writes a core (signal(7): "Core").
bool dumps_core(int sig) {
  switch (sig) {
    case SIGQUIT: case SIGILL: case SIGTRAP: case SIGABRT: case SIGBUS: case SIGFPE:
    case SIGSEGV: case SIGXCPU: case SIGXFSZ: case SIGSYS:
      return true;
    default:
      return false;
  }
}

// Signal-safe. The program's default action for sig, on this thread.
void die_default(int sig) {
  if (default_ignored(sig)) return;
  // The arena is out of core dumps: the live goroutines' slots go back in.
  if (dumps_core(sig)) arena_core_dump_mark(tls_g);
  // The kernel's sigaction: also before libc's is resolved (a fatal error
  // at start-up), and no lock of libc's is taken.
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    uint64_t mask;
  } dfl = {nullptr /* SIG_DFL */, 0, nullptr, 0};
  sys::raw4(SYS_rt_sigaction, sig, (long)&dfl, 0, 8);
  set_wrapped(sig, false);
  uint64_t b = bit(sig);
  sys::rt_sigprocmask(SIG_UNBLOCK, &b, nullptr, 8);
  sys::tgkill(sys::getpid(), sys::gettid(), sig);
  // Still here: a stop signal, and the process was continued.
  sys::rt_sigprocmask(SIG_BLOCK, &b, nullptr, 8);
}

void signal_handler(int sig, siginfo_t* si, void* uctx);

// Installs signal_handler for sig with the program's flags and mask.
// Locks held: action_lock.
int install_wrapper(int sig) {
  struct sigaction k;
  memset(&k, 0, sizeof k);
  k.sa_sigaction = signal_handler;
  int pf = prog_flags[sig].load(std::memory_order_relaxed);
  k.sa_flags = SA_SIGINFO | (pf & (SA_ONSTACK | SA_RESTART | SA_NODEFER | SA_RESETHAND |
                                   SA_NOCLDSTOP | SA_NOCLDWAIT));
  if (prog_handler[sig].load() <= kHandlerIgn) k.sa_flags |= SA_RESTART;  // default action kept by goshim
  // The preemption signal goes to a thread's alternate signal stack when it
  // has one (the G's sigaltstack is applied to its M): a thread that runs
  // code on a stack of its own making (Erlang's JIT runs Erlang code with
  // %rsp in the process heap, its signals all SA_ONSTACK) must never get a
  // frame pushed there, as natively no signal ever lands there.
  if (sig == config.preempt_signal) k.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  // Every signal blocked while goshim's handler decides where it runs: a
  // delivery inside a context switch must be known as one before anything
  // else is delivered (signal_handler_entry). The entry then sets the mask
  // the kernel would have set for the program's sa_mask (entry_unblock).
  // Not sigfillset: glibc's leaves out its own signals 32 and 33.
  from_bits(~0ull, &k.sa_mask);
  int r = real::sigaction(sig, &k, nullptr);
  if (r == 0) set_wrapped(sig, true);
  return r;
}

void bump_masks() {
  mask_gen.fetch_add(1, std::memory_order_release);
  sysmon_wake();
}

// Whether the program's disposition of sig discards it (SIG_IGN, or the
// default action of a signal ignored by default).
bool ignored_now(int sig) {
  uintptr_t h = prog_handler[sig].load(std::memory_order_acquire);
  return h == kHandlerIgn || (h == kHandlerDfl && default_ignored(sig));
}

// Keeps goshim's handler in the kernel for sig even while the program has
// the default action, so that a delivery to a stale-masked M is routed.
// for_wait: some G waits for sig (sigwait family): also when the program
// ignores it (SIG_IGN, or a default action that ignores it, SIGCHLD):
// natively a blocked signal is never discarded and the waiter gets it,
// while sysmon, which opens the waited signals, would have the kernel
// discard it (signal_route then hands it only to a waiter). Not SIGCHLD
// at SIG_IGN: the kernel generates none then (children are reaped).
void ensure_wrapped(int sig, bool for_wait = false) {
  if (sig <= 0 || sig > 64 || sig == SIGKILL || sig == SIGSTOP) return;
  if (default_ignored(sig) && !for_wait) return;
  if (bit(sig) & internal_mask()) return;
  if (kwrapped[sig].load(std::memory_order_acquire)) return;
  action_lock.lock();
  uintptr_t h = prog_handler[sig].load(std::memory_order_relaxed);
  bool wrap = h == kHandlerDfl || (for_wait && h == kHandlerIgn && sig != SIGCHLD);
  bool installed = !kwrapped[sig].load(std::memory_order_relaxed) && wrap && install_wrapper(sig) == 0;
  action_lock.unlock();
  if (installed) bump_masks();  // sysmon now takes it (signal_route)
}

// What the program's handler for sig blocks while it runs, besides the
// mask it interrupted: its sa_mask and, without SA_NODEFER, sig itself.
uint64_t prog_blocks(int sig) {
  return prog_mask[sig].load(std::memory_order_relaxed) |
         ((prog_flags[sig].load(std::memory_order_relaxed) & SA_NODEFER) ? 0 : bit(sig));
}

// Runs the program's disposition for sig on the current thread (a G, or a
// foreign thread when gp is null).
void run_program(int sig, siginfo_t* si, void* uc, G* gp) {
  uintptr_t h = prog_handler[sig].load(std::memory_order_acquire);
  int flags = prog_flags[sig].load(std::memory_order_relaxed);
  if (h == kHandlerIgn) return;
  if (h == kHandlerDfl) {
    die_default(sig);
    return;
  }
  if (flags & SA_RESETHAND) {
    prog_handler[sig].store(kHandlerDfl, std::memory_order_release);
    prog_flags[sig].store(0, std::memory_order_relaxed);
    handled_mask.fetch_and(~bit(sig));
    set_wrapped(sig, false);  // the kernel reset it
  }
  uint64_t saved = 0;
  bool delivering = false;
  int depth = 0;  // the handlers running on gp below this one
  if (gp) {
    // A program handler may block or park: never on the M's stack.
    GOSHIM_DCHECK(!gp->m || !signal_on_m_stack(gp->m, arch::get_sp()),
                  "run_program: a program handler on the M's signal stack");
    gp->nhandled++;
    if (!(flags & SA_RESTART)) gp->last_norestart = gp->nhandled;  // (signal_restart_since)
    depth = gp->insig;
    // Where this handler's frames begin (signal_longjmp): a jump to a
    // frame above them leaves it.
    if (depth < G::kSigSpKept) gp->sig_sp[depth] = arch::get_sp();
    __atomic_store_n(&gp->insig, depth + 1, __ATOMIC_RELAXED);
    // Either pthread_cancel (cancel_send) sees insig and sends SIGCANCEL, or
    // the handler's cancellable libc call sees the cancellation at entry.
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    saved = gp->sigmask;
    gp->sigmask |= prog_blocks(sig);
    // The handler runs: insig now keeps nested deliveries out (and a
    // handler that leaves by siglongjmp leaves no mark behind).
    delivering = __atomic_load_n(&gp->delivering, __ATOMIC_RELAXED);
    __atomic_store_n(&gp->delivering, false, __ATOMIC_RELAXED);
  } else {
    kt_nhandled++;
    if (!(flags & SA_RESTART)) kt_last_norestart = kt_nhandled;
  }
  // The handler may have interrupted gp's wait for one of the allocator's
  // locks (core/jemalloc_glue.cpp): suspended while it runs. gp stays on
  // its M meanwhile (no preemption in a handler); a handler left by
  // longjmp leaves it suspended (the wait's frames are gone). Only on gp's
  // own thread: another M's mark is that M's.
  M* wm = gp && gp == tls_g ? gp->m : nullptr;
  void* alloc_wait = wm ? alloc_wait_suspend(wm) : nullptr;
  // Or inside one of those locks' release (any thread): its waiter is woken
  // now, not once the handler is over.
  alloc_unlock_finish();
  {
    [[maybe_unused]] ProgramCallScope program;  // a handler left by longjmp ends the section too
    if (flags & SA_SIGINFO)
      ((void (*)(int, siginfo_t*, void*))h)(sig, si, uc);
    else
      ((void (*)(int))h)(sig);
  }
  if (wm) alloc_wait_resume(wm, alloc_wait);
  if (gp) {
    gp->sigmask = saved;
    __atomic_store_n(&gp->delivering, delivering, __ATOMIC_RELAXED);
    // The depth this handler found (a nested one may have left by a jump
    // that signal_longjmp could not place).
    __atomic_store_n(&gp->insig, depth, __ATOMIC_RELAXED);
  }
}

// Signal-safe. A signal was made pending on a G that waits for it in
// sigwait or sigsuspend: sysmon ends the wait (signal_route's pass over
// g_unrouted), since a handler cannot take the sema lock.
void wake_waiter_later() {
  sc_store(g_unrouted, true);
  sysmon_wake();
}

// Thread-directed signals queued on a G: every real-time instance and a
// standard signal's pthread_sigqueue value, in the pool with their siginfo.
// A new instance: false when the kernel would refuse to queue it
// (RLIMIT_SIGPENDING, sigpending_room_for).
bool gq_push(G* gp, int sig, int code, const union sigval* value) {
  siginfo_t si;
  tkill_info(&si, sig);
  si.si_code = code;
  if (code == SI_QUEUE && value) si.si_value = *value;
  return pool_push((uintptr_t)gp, gp->goid, sig, &si, false, true);
}

// Signal-safe. Puts back an instance taken from gp's queue ahead of the
// ones still queued (it was the oldest), with its siginfo.
void gq_push_front(G* gp, int sig, const siginfo_t* si) {
  pool_push((uintptr_t)gp, gp->goid, sig, si, true);
}

// Takes the oldest queued instance of sig for gp (On gp, or Signal-safe on
// its behalf): fills info and returns true, or false if none is queued.
// If more are queued, sig stays pending on gp.
bool gq_take(G* gp, int sig, siginfo_t* info) {
  if (!pool_take((uintptr_t)gp, gp->goid, sig, info)) return false;
  if (pool_find((uintptr_t)gp, gp->goid, sig)) gp->sigpending.fetch_or(bit(sig), std::memory_order_acq_rel);
  return true;
}

// The siginfo of a thread-directed signal sig that gp takes (its pending
// bit already cleared): the queued instance, else (a standard signal sent
// by pthread_kill) a plain SI_TKILL. False for a real-time signal with no
// instance left (another taker had it).
bool thread_info(G* gp, int sig, siginfo_t* info) {
  if (gq_take(gp, sig, info)) return true;
  if (sig >= kSigRtMin) return false;
  tkill_info(info, sig);
  return true;
}

// Handlers running on a thread that will hold (defer) or park the signal
// rather than run the program's handler: g0, an idle M, sysmon, or a G
// that blocks it. From the kernel's dequeue until the handler has made the
// signal visible (proc_pending, a G's pending set) it is in neither place;
// an exiting G waits for these to end before it looks (signal_g_exit).
std::atomic<uint32_t> deferring{0};
// How many live Gs block each signal, and how many Gs are exiting: a G
// that exits while every other live G blocks a signal it leaves open is
// the last taker of that signal (signal_g_exit). Approximate under
// concurrent mask changes; a handler's temporary mask is not counted.
std::atomic<int32_t> nblock[65];
std::atomic<int64_t> nexiting{0};
// How many of those Gs block any signal (a bound on every nblock[sig]:
// raised before a G's first count, lowered after its last), so that an
// exit with more other Gs than that skips the per-signal look.
std::atomic<int64_t> nmasked{0};

void account_mask(uint64_t m, int delta) {
  for (m &= ~internal_mask(); m; m &= m - 1) nblock[__builtin_ctzll(m) + 1].fetch_add(delta, std::memory_order_relaxed);
}
// A G's counted mask goes from cur to n (0: not counted).
inline void account_mask_change(uint64_t cur, uint64_t n) {
  uint64_t im = internal_mask();
  cur &= ~im;
  n &= ~im;
  if (cur == n) return;
  bool was = cur, is = n;
  if (is && !was) nmasked.fetch_add(1, std::memory_order_seq_cst);
  account_mask(n & ~cur, 1);
  account_mask(cur & ~n, -1);
  if (was && !is) nmasked.fetch_sub(1, std::memory_order_seq_cst);
}
// An exiting G's request that sysmon finish the handlers of what it took
// from the kernel so far (signal_g_exit), and sysmon's acknowledgement.
std::atomic<uint64_t> sysmon_barrier_req{0};
std::atomic<uint64_t> sysmon_barrier_ack{0};

// Another M's kernel mask is the last one it set: that of the G it ran
// last, until its next G or its sleep (set_kmask; changing it at every
// switch would cost two system calls per switch). Such a stale mask may
// leave open a signal that every G still running blocks, and the kernel
// may hand a process signal to that M, on g0, looking for work: its
// handler holds it for the process (defer) and sysmon routes it. Until
// that handler has run the signal is nowhere goshim looks: the kernel
// dequeued it (it is no longer pending there) on that thread's way back
// to user mode, and a thread descheduled there (a loaded machine) can
// hold it for milliseconds. A G exiting as the last taker of such a signal
// (signal_g_exit) would then leave without it and the handler would never
// run (tests/preload/signals_taker_exit, 1 run in 400 on a loaded
// machine). Since a thread runs the handler of a signal it dequeued before
// any other code of its own, it is enough to see each such M run some:
// its uprog move, or its mask block the signals. An M running a goroutine
// that leaves the signals open would run the program's handler there (it
// is not lost): only Ms on g0 or running a goroutine that blocks them are
// waited for. Bounded in time (an M asleep in the kernel on a stale mask,
// a lock's futex, has no handler to run; on a loaded machine each
// sched_yield may cost a whole time slice: a bound in iterations made
// such exits take seconds under qemu, sync_foreign).
//
// exact: past the bound, the wait goes on for as long as the kernel shows
// the thread able to hold a signal it dequeued (holds_dequeued): the
// kernel's dequeue happens on the thread's way back to user mode and its
// handler is the first code the thread runs there, so from the dequeue
// until the handler the thread is runnable (R: on a loaded machine it may
// wait there for hundreds of milliseconds), or in D at worst (the signal
// frame's page fault waiting for the mmap lock), never asleep in S. A
// thread seen in S holds none, and any it dequeued before has had its
// handler run. No time bound a load could exceed: a caller that must not
// return before such a handler has run (POSIX: kill() of its own process,
// sigpending; signal_sent_to_self, signal_pending_set).
namespace {
// Whether /proc's state letter s (task_state) allows the thread to be
// between the kernel's dequeue of a signal and its handler. Unknown (0:
// /proc not readable): no, as without exact.
bool holds_dequeued(char s) { return s == 'R' || s == 'D' || s == 't' || s == 'T' || s == 'W'; }
}  // namespace

// Signal-safe. Whether a wait for thread tid's handler of a signal it may
// have dequeued ends now: never before deadline; past it at once, or, if
// exact, once tid is seen (looked at every millisecond, *next_look) unable
// to hold one.
bool dequeue_wait_over(int64_t deadline, bool exact, pid_t tid, int64_t* next_look) {
  int64_t now = sys::nanotime();
  if (now < deadline) return false;
  if (!exact) return true;
  if (now < *next_look) return false;
  *next_look = now + 1000 * 1000;
  return !holds_dequeued(task_state(tid));
}

void wait_stale_ms(M* self, uint64_t set, bool exact = false) {
  int64_t deadline = 0;
  for (M* m = __atomic_load_n(&sched.allm, __ATOMIC_ACQUIRE); m; m = m->alllink) {
    if (m == self) continue;
    // What m's kernel mask leaves open of set: the kernel may hand it m.
    uint64_t kopen = ~__atomic_load_n(&m->cur_sigmask, __ATOMIC_ACQUIRE) & set;
    if (!kopen) continue;
    G* cg = __atomic_load_n(&m->curg, __ATOMIC_ACQUIRE);
    if (cg && !(__atomic_load_n(&cg->sigmask, __ATOMIC_ACQUIRE) & kopen)) continue;
    if (deadline == 0) deadline = sys::nanotime() + 10 * 1000 * 1000;
    // Two steps of uprog: the first may be a store made before the
    // dequeue that this thread saw late.
    uint32_t p0 = m->uprog.load(std::memory_order_seq_cst);
    int64_t next_look = 0;
    while (m->uprog.load(std::memory_order_seq_cst) - p0 < 2 &&
           (~__atomic_load_n(&m->cur_sigmask, __ATOMIC_ACQUIRE) & set) &&
           !dequeue_wait_over(deadline, exact, m->tid, &next_look))
      spin_yield();
  }
}

// ---- The kernel's order across takers ---------------------------------------
//
// The kernel dequeues a process signal for a thread on that thread's way
// back to user mode, and its handler runs only after that: a thread
// descheduled between the two (a loaded machine) holds the signal for
// milliseconds where it is neither pending in the kernel nor held by
// goshim. Several threads take process signals from the kernel: sysmon,
// an M on g0 whose kernel mask is still its last goroutine's, and the M of
// a goroutine that leaves the signal open. Each puts what it took where
// goshim looks when its handler runs, so what goshim holds is in the
// order the handlers ran, not the order of the kernel's dequeues (two
// takers of one signal at once cannot be ordered at all). Three rules keep
// the kernel's order:
//  - sysmon takes no signal that some M's kernel mask leaves open (or is
//    about to: M::open_soon), except one a goroutine sigwaits for: that M
//    takes it (signal_route). A goroutine that unblocks signals first has
//    sysmon stop taking them and waits for that (sysmon_close_wait);
//  - a thread that holds (defers) an instance for goshim blocks that
//    signal from then on, until goshim has handed the instance on: sysmon
//    (sysmon_hold, released by signal_route once the instance is taken and
//    no taker of a standard signal is still merging the kernel's, std_taking)
//    and an M on g0 (until its next mask change). What goshim holds of a
//    signal is then always older than what the kernel still queues, and a
//    standard signal sent while goshim holds one stays pending in the
//    kernel, where the taker finds and merges it (drop_kernel_dup). Without
//    it sysmon took a second SIGUSR1 from the kernel while sigwaitinfo took
//    the held one, and ran its handler after the taker's look: three
//    kill(SIGUSR1) gave sigwaitinfo two (tests/preload/signals_queue);
//  - before a goroutine decides between an instance goshim holds and the
//    kernel's (a real-time instance the kernel gave its M, a held instance
//    it is about to deliver while lower signals may be on their way), it
//    waits until every handler of what sysmon and the Ms on g0 took from
//    the kernel before that point has run (sysmon_sync). Without it a
//    goroutine unblocking SIGRTMIN+1 ran 101, 105, 107, 109, 103, 111: the
//    kernel gave it 105 onwards while sysmon sat descheduled with 103. The
//    goroutine looks at the kernel first, then waits: an instance taken
//    after its look was sent after it. In its delivery loop (G::delivering)
//    what the kernel gives its M is held behind goshim's instances and
//    delivered by the loop in turn (hold_for_loop).
std::atomic<uint64_t> sysmon_hold{0};
// What sysmon's kernel mask may leave open (published before it opens).
std::atomic<uint64_t> sysmon_open{0};
// What sysmon leaves to the Ms whose kernel mask leaves it open, and what
// it would leave to one that opened it (it takes it now).
std::atomic<uint64_t> sysmon_closed_by_ms{0};
std::atomic<uint64_t> sysmon_leaves{0};
// The mask_gen that sysmon's last look computed sysmon_leaves from
// (published after it: sysmon_leaves_since).
std::atomic<uint64_t> sysmon_leaves_gen{0};
// Gs taking goshim's instance of a standard signal and merging the
// kernel's (take_proc): sysmon keeps holding it meanwhile.
std::atomic<int32_t> std_taking[kSigRtMin];

// Signal-safe. In the handler of process signal sig that the calling
// thread (sysmon or an M on g0) holds for goshim (defer): sig stays
// blocked on this thread when the handler returns.
void hold_block(G* gp, int sig, void* uctx) {
  if (!uctx || !gp->is_g0()) return;
  ucontext_t* uc = (ucontext_t*)uctx;
  uint64_t b = bit(sig), um;
  memcpy(&um, &uc->uc_sigmask, sizeof um);
  if (gp == sysmon_g()) {
    um |= b;
    memcpy(&uc->uc_sigmask, &um, sizeof um);
    sysmon_hold.fetch_or(b, std::memory_order_seq_cst);
    return;
  }
  M* mp = gp->m;
  if (!mp) return;
  // Never over a forward in flight to this M ("Forwards"), and never where
  // the interrupted code set the kernel mask and has not recorded it yet
  // (set_kmask): the record must stay the kernel's mask.
  if (mp->fwd_bits.load(std::memory_order_seq_cst) & b) return;
  if (__atomic_load_n(&mp->cur_sigmask, __ATOMIC_ACQUIRE) != um) return;
  um |= b;
  memcpy(&uc->uc_sigmask, &um, sizeof um);
  __atomic_store_n(&mp->cur_sigmask, um, __ATOMIC_RELEASE);
}

// Signal-safe; on a goroutine's M (self). Returns once the handler of every
// process signal of set that sysmon or an M on g0 took from the kernel
// before this call has run (it holds it for goshim now). Not while self
// holds a runtime lock (sysmon's routing may wait for it). Bounded in time, unless exact (wait_stale_ms).
void sysmon_sync(M* self, uint64_t set, bool exact) {
  // (Only goshim's handler holds a signal: one it does not wrap is not.)
  set &= wrapped_bits.load(std::memory_order_acquire) & ~internal_mask();
  if (!set || (self && self->locks.load(std::memory_order_relaxed) > 0)) return;
  if (set & sysmon_open.load(std::memory_order_seq_cst) & ~sysmon_hold.load(std::memory_order_seq_cst)) {
    uint64_t req = sysmon_barrier_req.fetch_add(1, std::memory_order_seq_cst) + 1;
    sysmon_wake();
    // exact: as wait_stale_ms, until sysmon's thread is seen unable to
    // hold a dequeued signal (its ack may wait for a nap's end).
    int64_t deadline = sys::nanotime() + (exact ? 10 : 500) * 1000 * 1000, next_look = 0;
    while (sysmon_barrier_ack.load(std::memory_order_seq_cst) < req &&
           !dequeue_wait_over(deadline, exact, sysmon_tid(), &next_look))
      spin_yield();
  }
  wait_stale_ms(self, set, exact);  // and what the Ms on g0 took
}

// On a goroutine's M (self), before it opens set in its kernel mask and
// delivers what goshim holds of it: sysmon takes none of it from then on
// (the M counts it as open, open_soon), and what sysmon took before is held
// by then. Bounded in time, unless exact (wait_stale_ms).
// Returns the signals it counted as open on self (the caller takes them
// back once its mask is set; a switch to another G or a jump out of a
// handler clears them all: signal_apply, signal_longjmp).
uint64_t sysmon_close_wait(M* self, uint64_t set, bool exact) {
  set &= (handled_mask.load(std::memory_order_relaxed) | wrapped_bits.load(std::memory_order_relaxed)) &
         ~waited_mask.load(std::memory_order_relaxed) & ~internal_mask();
  if (!set || self->locks.load(std::memory_order_relaxed) > 0) return 0;
  self->open_soon.fetch_or(set, std::memory_order_seq_cst);
  // Only what sysmon leaves to an M that opens it (sysmon_leaves: not a
  // signal some G waits for meanwhile; sigsuspend_race timed out waiting
  // for sysmon to close one it never would), as of its look after the
  // latest change of dispositions and waits: the signals the program gave
  // a handler and blocked just before (their handlers installed while
  // sysmon slept) were not leavable at its previous look, and sysmon,
  // woken by the kernel for them but not run yet on a loaded machine, took
  // them beside this M (tests/preload/signals_queue_rounds: SIGRTMIN+2's
  // first instance run right after SIGRTMIN+1's first, sysmon's forwards,
  // while the kernel gave this M SIGRTMIN+1's next ones).
  uint64_t gen = mask_gen.load(std::memory_order_seq_cst);
  auto pending = [set, gen] { return sysmon_open.load(std::memory_order_seq_cst) & set & sysmon_leaves_since(gen); };
  if (!pending()) return set;
  sysmon_wake();
  // exact: past the bound, as long as sysmon's thread may hold a signal
  // it dequeued (wait_stale_ms): natively a signal the kernel queued
  // before the unblock is delivered before sigprocmask returns, and one
  // sysmon took is held for this M only once its handler has run (stress-ng
  // sigpending: "got an unexpected SIGUSR1 signal" when the bound passed).
  int64_t deadline = sys::nanotime() + (exact ? 10 : 500) * 1000 * 1000, next_look = 0;
  while (pending() && !dequeue_wait_over(deadline, exact, sysmon_tid(), &next_look))
    spin_yield();  // a real-time thread sleeps: sysmon is SCHED_OTHER on its CPU
  return set;
}

}  // namespace

bool signal_queue_room() {
  if (!(pool_used.load(std::memory_order_acquire) | held_std_n.load(std::memory_order_acquire))) return true;
  return sigpending_room_for(1);
}

long signal_send_queued(pid_t tid, int sig, union sigval value) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = sig;
  si.si_code = SI_QUEUE;
  si.si_pid = (pid_t)sys::getpid();
  si.si_uid = getuid();
  si.si_value = value;
  return sys::raw4(SYS_rt_tgsigqueueinfo, sys::getpid(), tid, sig, (long)&si);
}

namespace {

// The main G's state lets it take process signal sig as the kernel's
// leader would (signal_leader_takes without the siginfo part).
bool leader_state_takes(const G* lp, int sig) {
  uint64_t b = bit(sig);
  if (!lp || lp->magic != kGMagic || !(lp->flags & kGFlagMain)) return false;
  GStatus st = lp->status.load(std::memory_order_acquire);
  if (st == GStatus::Idle || st == GStatus::Dead) return false;
  if (lp->sig_exiting.load(std::memory_order_seq_cst)) return false;
  uint64_t mask = __atomic_load_n(&lp->sigmask, __ATOMIC_ACQUIRE);
  bool waits = lp->sigwaiting.load(std::memory_order_acquire) & b;
  if ((mask & b) && !waits) return false;
  // The kernel passes over a leader that already has a signal to handle
  // (wants_signal: !task_sigpending) unless it is running. Not for sig
  // itself: a second standard instance merges with the one pending for
  // the leader (natively dropped before the kernel chooses a thread; run
  // on another G it took the leader's held instance, whose wait then
  // ended with EINTR and no handler), a real-time one queues behind it.
  uint64_t due = lp->sigpending.load(std::memory_order_acquire) & ~mask;
  if (due & ~b) return false;
  if (st == GStatus::Waiting && !waits && lp->wait_kind.load(std::memory_order_acquire) == WaitKind::None)
    return false;  // a wait nothing but its own event ends (pthread_join, a lock)
  return true;
}

// Sent to the process as a whole (the kernel's choice starts at the
// leader), as opposed to a thread-directed signal, a fault, or a signal
// the kernel sends to the thread that caused it or to the parent thread.
bool sent_to_process(int sig, const siginfo_t* si) {
  if (!si || synchronous(sig, si)) return false;
  switch (si->si_code) {
    case SI_USER:
      // The kernel's own SIGPIPE and SIGXFSZ for a write are thread-directed
      // and look like the process's kill() of itself.
      if ((sig == SIGPIPE || sig == SIGXFSZ) && si->si_pid == (pid_t)sys::getpid()) return false;
      return sig != SIGCHLD;
    case SI_QUEUE:
      // From this process: possibly pthread_sigqueue (rt_tgsigqueueinfo).
      return si->si_pid != (pid_t)sys::getpid();
    case SI_MESGQ:
    case SI_ASYNCIO:
      return true;
    case SI_KERNEL:
      return sig == SIGALRM;  // ITIMER_REAL, alarm()
    // Not SI_TIMER: for a POSIX timer Linux 6.4 and later prefer the
    // thread the timer interrupted (send_sigqueue), where goshim finds it.
    default:
      return false;
  }
}

// ---- Signals raised by a call ----
//
// The kernel raises SIGPIPE (EPIPE) and SIGXFSZ (EFBIG) on the thread
// whose write caused them. While the G that wrote blocks the signal, so
// does its M's kernel mask, and the instance stays pending on that kernel
// thread, not on the G: no wait of the G looks there, and the next G the
// M runs that leaves the signal open got it (its handler ran on the wrong
// thread, or the default action ended the process, where natively it
// stays pending on the writer until the writer takes it or exits). So:
// the fd layer moves it onto the G right after a write goshim runs
// (signal_claim_raised); sigpending and the sigwait family move it when
// the G looks (a write inside libc, stdio's, is not goshim's to see); an
// exiting G takes it along; and before an M's kernel mask opens it (a G
// that leaves it open comes, set_kmask), one still pending there goes to
// the last G that ran on the M blocking it (M::raised_owner), or is
// dropped with it if that G has exited. Signal-safe.
// Signal-safe. Takes each signal of sigs from the calling thread's
// kernel queue (its own instance first) and queues it on owner (goid: the
// thread it must still be), with the kernel's siginfo, as a pthread_kill
// to it would: a wait for it ends, an open mask delivers it. One that
// turns out to be the process's goes where sysmon would put it; one whose
// owner is gone (natively it went with that thread), or has it pending
// already (one standard instance per thread), is dropped.
void move_raised(G* owner, uint64_t goid, uint64_t sigs) {
  for (; sigs; sigs &= sigs - 1) {
    int sig = __builtin_ctzll(sigs) + 1;
    uint64_t b = bit(sig);
    siginfo_t si;
    struct timespec zero = {0, 0};
    if (sys::raw4(SYS_rt_sigtimedwait, (long)&b, (long)&si, (long)&zero, 8) != sig) continue;
    if (sent_to_process(sig, &si)) {
      defer(sig, &si);
      continue;
    }
    if (!owner || __atomic_load_n(&owner->goid, __ATOMIC_ACQUIRE) != goid ||
        (owner->sigpending.load(std::memory_order_acquire) & b))
      continue;
    pool_push((uintptr_t)owner, goid, sig, &si, false, false);  // the kernel accepted it
    owner->sigpending.fetch_or(b, std::memory_order_seq_cst);
    if (owner->sigwaiting.load(std::memory_order_seq_cst) & b) {
      wake_waiter_later();
    } else if (!(owner->sigmask & b)) {
      g_unrouted.store(true, std::memory_order_release);
      sysmon_wake();
    }
  }
}

void hand_stale_raised(M* mp, uint64_t opens) {
  uint64_t k = 0;
  if (sys::raw2(SYS_rt_sigpending, (long)&k, 8) != 0 || !(k & opens)) return;
  // A process-wide one stays where it is: the kernel gives it to whoever
  // leaves it open, as natively.
  move_raised(mp->raised_owner, mp->raised_goid, thread_private_pending(k & opens, 0));
}

}  // namespace

bool signal_leader_takes(const G* leader, int sig, const siginfo_t* si) {
  return sent_to_process(sig, si) && leader_state_takes(leader, sig);
}

SigHere signal_here(const G* gp, int sig, const siginfo_t* si, const G* want, bool proc_fwd, const G* leader) {
  uint64_t b = bit(sig);
  bool sync = synchronous(sig, si);
  bool waits = gp->sigwaiting.load(std::memory_order_relaxed) & b;
  // Sent to this M for a G that left it before the signal arrived: it is
  // pending on that G (sysmon wakes it if it is parked).
  if (want && want != gp) return SigHere::ForOther;
  // g0, an idle M or sysmon: route it to a G; a fault in the scheduler
  // itself: the default action.
  if (gp->is_g0()) return sync ? SigHere::DieHere : SigHere::Defer;
  // Sent to the process while the main G would take it natively (the
  // kernel starts its choice at the leader): held for sysmon, which
  // routes it there (SigRoute), ending the main G's wait as natively.
  if (!want && leader && gp != leader && signal_leader_takes(leader, sig, si)) return SigHere::Defer;
  // The kernel gave a process signal to the M of a G entering sigsuspend
  // (its set published, the G perhaps already past its last check and
  // about to park): running the handler here would let it park with the
  // handler already run and sleep forever. Held instead: sysmon routes
  // it to the waiting G, which delivers it after its wait (wait_for's
  // and suspend's protocol with signal_wake_waiter).
  if (!want && !sync && !(gp->sigmask & b) && waits && si && si->si_code != SI_TKILL)
    return SigHere::Defer;
  // A forward to gp in the kernel's sigsuspend inside a program handler,
  // under a mask that opens it: natively the kernel runs its handler there
  // and the sigsuspend returns (signal_ksuspend).
  if (!sync && want == gp && !proc_fwd && (gp->ksuspend_open.load(std::memory_order_relaxed) & b))
    return SigHere::Run;
  if (!sync && (gp->sigmask & b)) {
    // A routed process signal gp blocks again: still claimed by gp,
    // delivered when it unblocks it; else gp took the instance another way
    // (it unblocked the signal) or gave it back at its exit: this forward
    // has nothing left to carry.
    if (proc_fwd) return SigHere::ProcFwdBlocked;
    // Thread-directed: waits for gp to unblock it (or its sigwait).
    if (want || (si && si->si_code == SI_TKILL)) return SigHere::PendingOnG;
    return SigHere::Defer;  // a process signal: another G may take it
  }
  // A forward (or the program's own tkill) reaching gp inside its
  // sigsuspend or sigwait window: the set is published and gp may be
  // past its last look at its pending signals and about to park (this
  // handler interrupted it there). Running the program's handler here
  // would let gp park with the handler already run, and nothing would
  // end that wait. It stays pending on gp instead, and sysmon ends the
  // wait through its word (signal_route); gp delivers it after.
  if (!sync && waits) return proc_fwd ? SigHere::ProcFwdWaiting : SigHere::ThreadWaiting;
  return SigHere::Run;  // gp leaves it open, or it is gp's own fault
}

static void reach_running(G* gp, int sig);

namespace {

void signal_handler_body(int sig, siginfo_t* si, void* uctx, bool stuck, bool mid);
void signal_handler_moved(int sig, siginfo_t* si, void* uctx);

// Handler frames a G may leave on one M and return through on another
// carry the sigaltstack rt_sigreturn sets: the current M's (goshim's
// record of it), never the one the frame was pushed under (another M's
// own signal stack). Signal-safe.
inline void fix_uc_stack(G* gp, void* uctx) {
  M* mp = gp->m;
  if (!mp || !uctx) return;
  ucontext_t* uc = (ucontext_t*)uctx;
  uc->uc_stack = mp->cur_altstack;
  if (uc->uc_stack.ss_flags & SS_DISABLE) uc->uc_stack = stack_t{nullptr, SS_DISABLE, 0};
}

// The frame of this delivery lies on the M's own signal stack (gp a
// goroutine): moves it onto the stack the G was interrupted on and
// enters signal_handler_moved there, unless it may stay or cannot move
// (then it returns; "The M's signal stack" above).
void sigstack_move(int sig, siginfo_t* si, ucontext_t* uc, G* gp) {
  M* mp = gp->m;
  uintptr_t isp = arch::uc_sp(uc);
  if (signal_on_m_stack(mp, isp)) return;  // nested in goshim's handler here
  if (!arch::sigframe_is_kernel(si, uc)) return;
  bool own = gp->stack.hi && isp > gp->stack.lo && isp <= gp->stack.hi;
  // A program handler's frame, and room for goshim's frames before it
  // (without it the signal waits on the G, "stuck").
  size_t reserve = kSigframeReserve / 4;
  if (sig == config.preempt_signal) {
    switch (preempt_move_wanted(si, uc, gp)) {
      case PreemptMove::NotOurs:  // the program's own: its handler runs
        reserve = kSigframeReserve / 4;
        break;
      case PreemptMove::Stay:
        return;
      case PreemptMove::Move:  // a delivery or a cancellation: as the kernel would push one
        reserve = kSigframeReserve;
        break;
      case PreemptMove::MoveOwnStack:  // a switch: only on the G's own stack
        if (!own) return;
        reserve = kSigframeReserve;
        break;
    }
  }
  uintptr_t top = isp - arch::kRedZone;
  // On the G's own stack, only above its guard (with room for the
  // handler's own frames when goshim switches or unwinds there); on a
  // stack goshim does not know, where the kernel would push it.
  if (own && (arch::sigframe_copy_lo(uc, top) < gp->stack.lo + reserve ||
              arch::sigframe_copy_lo(uc, top) > top))
    return;
  siginfo_t* nsi;
  ucontext_t* nuc;
  uintptr_t nsp = arch::sigframe_copy(si, uc, top, &nsi, &nuc);
  goshim_sigframe_enter(nsp, sig, nsi, nuc, signal_handler_moved);
}

// Whether the context uc was interrupted inside a context switch
// (arch::pc_mid_switch). goshim's handlers are installed with every signal
// blocked (install_wrapper, signal_init's SIGCANCEL): the kernel delivers
// nothing else before such a handler has looked, neither nested in its
// first instructions nor pushed with it at once, so the context it was
// given is the one to look at. Signal-safe.
bool mid_switch(const ucontext_t* uc) { return uc && arch::pc_mid_switch(arch::uc_pc(uc)); }

// Signal-safe. In goshim's handler for sig, entered by the kernel with
// every signal blocked, once it knows the delivery did not land inside a
// context switch: the mask the kernel sets for a handler installed with
// the program's sa_mask and flags (the interrupted mask, prog_blocks; the
// preemption signal always blocked in its own handler), so that what runs
// here (the program's handler, a delivery, a switch out) finds the mask
// it found before every signal was blocked at entry. From here, signals
// nest as they would in the program's handler.
void entry_unblock(int sig, const void* uctx) {
  if (!uctx) return;
  uint64_t k;
  memcpy(&k, &((const ucontext_t*)uctx)->uc_sigmask, sizeof k);
  k |= sig == config.preempt_signal ? bit(sig) | prog_mask[sig].load(std::memory_order_relaxed)
                                     : prog_blocks(sig);
  sys::rt_sigprocmask(SIG_SETMASK, &k, nullptr, 8);
}

void signal_handler_entry(int sig, siginfo_t* si, void* uctx, bool moved) {
  G* gp = tls_g;
  bool stuck = false;
  // Taken inside a context switch (goshim_mcall, goshim_gogo,
  // goshim_switch) between its move of the stack pointer and its move of
  // the thread pointer: tls_g names a G whose stack is not the one in use
  // (g0's, or the G switched to). A program handler run here for gp ran
  // on g0's stack or on another G's (sigstack_handler_block: T3's
  // SIGWINCH handler, no SA_ONSTACK, outside T3's stack 1 run in ~300).
  // Taken as on g0 ("mid"): nothing runs or switches here, the frame is
  // not moved, and a signal for gp stays pending on it, delivered where
  // it next looks (it is leaving or entering this M: at its resumption).
  // Every signal stays blocked until this handler returns (the kernel
  // blocked them all for it, install_wrapper): one nested here would find
  // a consistent pc (this handler's) and the same inconsistent tls_g, and
  // run gp's handlers on this stack (a delivery kick that moves its frame
  // "where it was interrupted" and delivers what is pending on gp). After
  // rt_sigreturn it is taken at the switch's pc again, as here. Blocked by
  // the kernel, not by a call made here: a signal nested between this
  // handler's first instruction and such a call was not recognised.
  bool mid = !moved && gp && !gp->is_g0() && gp->m && uctx && mid_switch((const ucontext_t*)uctx);
  if (mid)
    stuck = true;
  else if (!moved)
    entry_unblock(sig, uctx);
  if (arch::kSigframeMove && gp && !gp->is_g0() && gp->m && uctx && !mid) {
    M* mp = gp->m;
    if (signal_on_m_stack(mp, (uintptr_t)uctx)) {
      GOSHIM_DCHECK(!moved, "signal_handler: a moved frame on the M's signal stack");
      sigstack_move(sig, si, (ucontext_t*)uctx, gp);  // returns only if it stays here
      stuck = true;
    } else if (!moved && sig == config.preempt_signal && mp->sigstk.ss_sp &&
               mp->cur_altstack.ss_sp == mp->sigstk.ss_sp && (gp->altstack.ss_flags & SS_DISABLE) &&
               !signal_on_m_stack(mp, arch::uc_sp((ucontext_t*)uctx))) {
      // The contract: goshim's preemption signal never lands on a
      // goroutine's stack that has no sigaltstack.
      GOSHIM_DCHECK(false, "signal_handler: the preemption signal's frame is not on the M's signal stack");
    }
    GOSHIM_DCHECK(!moved || !signal_on_m_stack(mp, arch::get_sp()),
                  "signal_handler: moved, but running on the M's signal stack");
  }
  bool count = gp && sig != config.preempt_signal && !synchronous(sig, si) &&
               (gp->is_g0() || mid || (gp->sigmask & bit(sig)) ||
                (gp->sigwaiting.load(std::memory_order_relaxed) & bit(sig)));
  if (count) deferring.fetch_add(1, std::memory_order_seq_cst);
  signal_handler_body(sig, si, uctx, stuck, mid);
  if (count) deferring.fetch_sub(1, std::memory_order_seq_cst);
  if (gp && !gp->is_g0() && !stuck) fix_uc_stack(gp, uctx);
}

// The single kernel handler for every signal goshim routes.
void signal_handler(int sig, siginfo_t* si, void* uctx) { signal_handler_entry(sig, si, uctx, false); }
// The same, entered on a frame sigstack_move made.
void signal_handler_moved(int sig, siginfo_t* si, void* uctx) { signal_handler_entry(sig, si, uctx, true); }

// Signal-safe. The kernel gave gp's M instance si of process signal sig
// while gp's delivery loop runs (signal_deliver): held for that loop, as
// the newest instance (a standard one merges with one held already);
// false if the queue is full.
bool hold_for_loop(G* gp, int sig, const siginfo_t* si) {
  if ((sig >= kSigRtMin || held_empty(sig)) && !held_push(sig, si)) return false;
  gp->sigpending_proc.fetch_or(bit(sig), std::memory_order_acq_rel);
  gp->sigpending.fetch_or(bit(sig), std::memory_order_acq_rel);
  return true;
}

// A signal whose handler would run on gp but whose frame is stuck on the
// M's signal stack: pending on gp (its siginfo queued first on gp, as
// ThreadWaiting below), delivered at its next delivery point. gp may be
// about to park in goshim code, where nothing looks at its pending
// signals: nested in goshim's handler on this stack (the preemption
// signal's, which blocks it), this M gets a delivery kick, taken once that
// handler has returned (the preemption signal stays blocked in this
// frame's mask until then); sysmon interrupts gp if it is found parked.
// Signal-safe.
void hold_stuck(G* gp, int sig, siginfo_t* si, G* want, bool proc_fwd, void* uctx) {
  uint64_t b = bit(sig);
  if (want && (gp->sigpending_proc.load(std::memory_order_acquire) & b)) {
    gp->sigpending.fetch_or(b, std::memory_order_acq_rel);  // the routed instance stays held
  } else if (proc_fwd) {
    return;  // taken another way already
  } else if (!want && si && si->si_code != SI_TKILL && hold_for_loop(gp, sig, si)) {
    // A process signal: held as its newest instance and claimed by gp, in
    // the kernel's order with the others (a thread-directed instance at
    // the head of gp's queue would run before older ones).
  } else {
    if (si && (sig >= kSigRtMin || si->si_code != SI_TKILL || si->si_pid != (pid_t)sys::getpid()))
      gq_push_front(gp, sig, si);
    gp->sigpending.fetch_or(b, std::memory_order_acq_rel);
  }
  if (uctx && config.preempt_signal && gp->m &&
      signal_on_m_stack(gp->m, arch::uc_sp((ucontext_t*)uctx))) {
    ucontext_t* uc = (ucontext_t*)uctx;
    uint64_t k;
    memcpy(&k, &uc->uc_sigmask, sizeof k);
    k |= bit(config.preempt_signal);
    memcpy(&uc->uc_sigmask, &k, sizeof k);
    preempt_kick(gp, false);
  }
  g_unrouted.store(true, std::memory_order_release);
  sysmon_wake();
}


// Signal-safe; on gp's M, gp running and outside any program handler.
// Whether a signal lower than sig that gp leaves open is due on gp, or
// held for the process, once what sysmon and the Ms on g0 took from the
// kernel before this point is held (sysmon_sync): then the kernel would
// have given gp's thread that one before sig.
bool lower_due(G* gp, int sig) {
  uint64_t lower = ~gp->sigmask & (bit(sig) - 1) & ~internal_mask();
  if (!lower) return false;
  auto due = [gp, lower] {
    return ((gp->sigpending.load(std::memory_order_seq_cst) | gp->sigpending_proc.load(std::memory_order_seq_cst) |
             proc_pending.load(std::memory_order_seq_cst)) &
            lower) != 0;
  };
  if (due()) return true;
  sysmon_sync(gp->m, lower);
  return due();
}

// Signal-safe; on gp's M, gp running and outside any program handler, in
// the handler of the forward of process signal sig that sysmon routed to
// gp. lower_due, and also a lower signal gp leaves open that is still
// queued in the kernel: the forward is thread-directed, and the kernel
// gives a thread what was sent to it before anything queued for the
// process, however low, where natively gp's thread would have dequeued
// the lower one first (the routed instance was taken by another thread:
// sysmon, or an M asleep on g0 whose kernel mask was computed before the
// program gave the signal a handler).
bool lower_queued(G* gp, int sig) {
  uint64_t lower = ~gp->sigmask & (bit(sig) - 1) & ~internal_mask();
  if (!lower) return false;
  uint64_t k = 0;
  if (sys::raw2(SYS_rt_sigpending, (long)&k, 8) == 0 && (k & lower)) return true;
  return lower_due(gp, sig);
}

void signal_handler_body(int sig, siginfo_t* si, void* uctx, bool stuck, bool mid) {
  int saved_errno = errno;
  if (sig == config.preempt_signal && preempt_on_signal(si, uctx, stuck)) {
    errno = saved_errno;
    return;
  }
  // (preemption switches the G out from inside its frame: not signal-safe
  // in that sense, and done above.)
  GOSHIM_SIGNAL_SAFE();
  if ((sig == SIGSEGV || sig == SIGBUS) && dump_fault_guard()) return;
  if (sig == dump_signal() && (prog_handler[sig].load(std::memory_order_acquire) == kHandlerDfl ||
                                dump_sig_inherited_ign.load(std::memory_order_acquire))) {
    dump_request();  // the program keeps running
    errno = saved_errno;
    return;
  }
  G* gp = tls_g;
  // Inside a context switch (signal_handler_entry): as on the M's g0.
  G* self = gp;
  if (mid) gp = &gp->m->g0;
  if (gp == nullptr) {
    run_program(sig, si, uctx, nullptr);  // a foreign kernel thread: its own signal
    errno = saved_errno;
    return;
  }
  M* mp = gp->m;
  // sigfwd: the G this signal was forwarded to, tagged (bit 0) when it
  // forwards a process signal routed by sysmon (its siginfo is in held[]).
  // Only a signal this process sent to a thread (tgkill, rt_tgsigqueueinfo)
  // can be the forward: a process signal the kernel hands this thread
  // meanwhile must not consume the mark (the forward, arriving after it,
  // would then pass for the program's own tkill).
  // A signal the kernel delivers without its siginfo may be a forward too
  // ("Forwards"): its mark says so.
  bool maybe_fwd = !si || lost_info(si) ||
                   ((si->si_code == SI_TKILL || si->si_code == SI_QUEUE) && si->si_pid == (pid_t)sys::getpid());
  uintptr_t fwd = mp && maybe_fwd
                      ? (uintptr_t)mp->sigfwd[sig].exchange(nullptr, std::memory_order_acq_rel)
                      : 0;
  if (fwd) fwd_clear(mp, sig);
  G* want = (G*)(fwd & ~(uintptr_t)1);
  bool proc_fwd = fwd & 1;
  uint64_t b = bit(sig);
  switch (signal_here(gp, sig, si, want, proc_fwd, main_g())) {
    case SigHere::ForOther:
      // A thread-directed instance keeps its siginfo (signal_send took it
      // from want's queue), as ThreadWaiting below.
      if (!proc_fwd && si &&
          (sig >= kSigRtMin || si->si_code != SI_TKILL || si->si_pid != (pid_t)sys::getpid()))
        gq_push_front(want, sig, si);
      want->sigpending.fetch_or(b, std::memory_order_seq_cst);
      g_unrouted.store(true, std::memory_order_release);
      sysmon_wake();
      // want may run on another M by now, past its look at its pending
      // signals there: forwarded again (reach_running). Not when want is
      // the G switching on this M ("mid"): it looks at its pending
      // signals as it resumes, and a forward to this thread would arrive
      // again before the switch could take one step.
      if (!proc_fwd && !(mid && want == self)) reach_running(want, sig);
      break;
    case SigHere::DieHere:
      die_default(sig);
      break;
    case SigHere::Defer:
      defer(sig, si);
      if (!mid) hold_block(gp, sig, uctx);
      break;
    case SigHere::ProcFwdBlocked:
      if (gp->sigpending_proc.load(std::memory_order_acquire) & b)
        gp->sigpending.fetch_or(b, std::memory_order_acq_rel);
      break;
    case SigHere::PendingOnG:
      gp->sigpending.fetch_or(b, std::memory_order_acq_rel);  // thread-directed: waits for it
      // gp may be in sigwait for it, past its last look and about to
      // park: sysmon ends that wait (signal_route).
      if (gp->sigwaiting.load(std::memory_order_seq_cst) & b) wake_waiter_later();
      break;
    case SigHere::ProcFwdWaiting:
      // The routed instance is still in held[] while gp claims it.
      if (gp->sigpending_proc.load(std::memory_order_acquire) & b) {
        gp->sigpending.fetch_or(b, std::memory_order_acq_rel);
        wake_waiter_later();
      }
      break;
    case SigHere::ThreadWaiting:
      // A thread-directed instance: its siginfo goes back at the head of
      // gp's queue (signal_send took it from there), except a standard
      // pthread_kill's plain SI_TKILL, which thread_info rebuilds.
      if (si && (sig >= kSigRtMin || si->si_code != SI_TKILL || si->si_pid != (pid_t)sys::getpid()))
        gq_push_front(gp, sig, si);
      gp->sigpending.fetch_or(b, std::memory_order_acq_rel);
      wake_waiter_later();
      break;
    case SigHere::Run:
      if (__builtin_expect(stuck, 0)) {
        // The frame could not move to gp's stack (no room above its
        // guard): a fault gets its default action, as the kernel gives
        // one whose frame it cannot push; anything else waits on gp.
        if (synchronous(sig, si))
          die_default(sig);
        else
          hold_stuck(gp, sig, si, want, proc_fwd, uctx);
        break;
      }
      // Inside gp's delivery loop (signal_deliver, between choosing a
      // signal and running its handler): a process signal waits for that
      // loop, which delivers in order (it may have just taken an older
      // instance of the same signal).
      if (want && proc_fwd && __atomic_load_n(&gp->delivering, __ATOMIC_RELAXED) &&
          (gp->sigpending_proc.load(std::memory_order_acquire) & b)) {
        gp->sigpending.fetch_or(b, std::memory_order_acq_rel);
      } else if (!want && si && si->si_code != SI_TKILL && !synchronous(sig, si) &&
                 __atomic_load_n(&gp->delivering, __ATOMIC_RELAXED) && hold_for_loop(gp, sig, si)) {
        // (held: the loop delivers it in turn)
      } else if (!want && si && si->si_code != SI_TKILL && !synchronous(sig, si) && gp->insig == 0 &&
                 lower_due(gp, sig) && hold_for_loop(gp, sig, si)) {
        // A process signal the kernel gave this M while a lower one gp
        // leaves open is pending on gp or for the process, or on its way
        // into goshim (sysmon took it while gp's M blocked it, gp in a
        // handler): natively gp's thread would dequeue the lower one
        // first. Held behind it, and gp's delivery loop runs both in the
        // kernel's order (tests/preload/signals_order_held).
        signal_deliver(gp);
      } else if (want && proc_fwd && gp->insig == 0 && (gp->sigpending_proc.load(std::memory_order_acquire) & b) &&
                 lower_queued(gp, sig)) {
        // The instance routed here waits for the lower ones: gp's delivery
        // loop runs them in the kernel's order (it takes the kernel's
        // first as its mask opens).
        gp->sigpending.fetch_or(b, std::memory_order_acq_rel);
        signal_deliver(gp);
      } else if (want && (gp->sigpending_proc.fetch_and(~b, std::memory_order_acq_rel) & b)) {
        // Routed process signals carry their original siginfo.
        siginfo_t orig;
        if (take_proc(gp, sig, &orig, false)) run_program(sig, &orig, uctx, gp);
      } else if (proc_fwd) {
        // The forward of a process signal gp already took another way (it
        // unblocked the signal and delivered the held instance itself): its
        // plain tgkill must not run as a signal of its own with SI_TKILL.
      } else if (!want && si && si->si_code != SI_TKILL && !held_empty(sig) &&
                 (sig < kSigRtMin || held_push(sig, si))) {
        // A process signal the kernel gave this G while goshim holds older
        // instances of it (sysmon took them from the kernel first): a
        // real-time one goes behind them and this G runs the oldest, so
        // that they arrive in sending order; a standard one was sent while
        // one was pending, so natively it merged with it: this G runs the
        // held one only (it had one USR1 handler too many, signals_fatal).
        siginfo_t orig;
        if (take_held(gp, sig, &orig, false)) run_program(sig, &orig, uctx, gp);
      } else {
        run_program(sig, si, uctx, gp);
      }
      break;
  }
  errno = saved_errno;
}

// pthread_cancel sends SIGCANCEL to the M running a G that is in a
// blocking call (cancel_send). The G is canceled here when glibc's own
// handler would act:
//   - asynchronous cancellation is on: the program's choice, or glibc <=
//     2.40 inside one of its cancellable system calls (it switches to
//     asynchronous mode around the call);
//   - glibc >= 2.41: the interrupted pc lies in its cancellable system call
//     bridge (core/cancelproto.hpp), i.e. before the system call or at it
//     (a call the kernel would restart);
// and goshim's own cancellable kernel waits (goshim_cancellable_syscall,
// sync_wait on a process-shared object) are ended with EINTR instead, when
// they are cancellation points or cancellation is asynchronous: the caller
// leaves its blocking section normally and then acts on the cancellation.
void sigcancel_handler(int sig, siginfo_t* si, void* uctx) {
  if (sig != kSigCancel || !si || si->si_pid != (pid_t)sys::getpid() || si->si_code != SI_TKILL)
    return;
  // Inside a context switch tls_g names a G whose stack is not in use:
  // its pc is goshim's, so nothing below acts on it (a cancellation is
  // never acted on in goshim's code), and every signal stays blocked (the
  // kernel blocked them all for this handler), as in signal_handler_entry.
  // Otherwise the mask the kernel set before (SIGCANCEL itself).
  if (uctx && !mid_switch((const ucontext_t*)uctx)) {
    uint64_t k;
    memcpy(&k, &((const ucontext_t*)uctx)->uc_sigmask, sizeof k);
    k |= bit(kSigCancel);
    sys::rt_sigprocmask(SIG_SETMASK, &k, nullptr, 8);
  }
  G* gp = tls_g;
  if (!gp || gp->is_g0()) return;
  // Nested in goshim's handler on the M's own signal stack: never unwound
  // from there.
  if (gp->m && signal_on_m_stack(gp->m, arch::get_sp())) return;
  int ch = __atomic_load_n((int*)(gp->tp + tls::L.cancelhandling), __ATOMIC_ACQUIRE);
  // enabled (bit 0 clear), canceled (bit 3), not exiting (bit 4)
  if ((ch & 0x19) != 0x08) return;
  bool async = ch & 0x02;
  ucontext_t* uc = (ucontext_t*)uctx;
  uintptr_t pc = arch::uc_pc(uc);
  if (pc >= (uintptr_t)goshim_cancel_sc_start && pc < (uintptr_t)goshim_cancel_sc_end) {
    if (async || gp->kwait_cancellable) {
      arch::uc_set_pc(uc, (uintptr_t)goshim_cancel_sc_end);
      arch::uc_set_ret(uc, -EINTR);
    }
    return;
  }
  if (!async && !cancel_in_glibc_bridge(pc)) return;
  if (gp->status.load(std::memory_order_relaxed) == GStatus::Syscall) {
    // In a blocking section: only one with a cleanup for the unwinding
    // (blocking_cancellable: the real libc call made there), and never
    // from goshim's own code around that call.
    if (gp->unwind_guarded && !dladdr_is_self(pc)) cancel_point();
    return;
  }
  // Running in a program signal handler, whose calls go to libc's own
  // (cancel_send signals such a G): one of glibc's cancellable system calls
  // the handler made is a cancellation point, as natively
  // (tests/preload/cancel_wait_in_handler).
  if (gp->insig > 0) {
    if (handler_cancel_safe(gp, uctx)) cancel_point();
    return;
  }
  // Running (the blocking call it was signalled in is over, or glibc made
  // a call of the program's asynchronous): never unwind through goshim's
  // frames, also when the pc is in libc or the vDSO called by goshim
  // (a clock read under a sema bucket lock: tests/preload/cancel_async_race).
  if (async_cancel_safe(gp, uctx)) cancel_point();
}

}  // namespace

namespace {

// The depth of frames below a handler's start that a jump target on a
// stack goshim does not know the bounds of (the main thread's, or one the
// program made itself: makecontext, a coroutine library) may lie at and
// still count as inside that handler. A handler's own frames are far
// shallower; the program's other stacks are usually farther apart.
constexpr uintptr_t kUnknownStackSpan = 256 * 1024;

// Which of gp's stacks sp lies on, as far as goshim knows: 2 its alternate
// signal stack, 1 its own stack, 0 another.
int stack_of(const G* gp, uintptr_t sp) {
  uintptr_t alt = (uintptr_t)gp->altstack.ss_sp;
  if (!(gp->altstack.ss_flags & SS_DISABLE) && sp >= alt && sp < alt + gp->altstack.ss_size)
    return 2;
  if (gp->stack.hi && sp >= gp->stack.lo && sp < gp->stack.hi) return 1;
  return 0;
}

// Whether a jump that resumes with stack pointer sp stays inside the
// handler whose frames begin below entry (run_program's stack pointer): a
// deeper frame of the same stack.
bool inside_handler(const G* gp, uintptr_t sp, uintptr_t entry) {
  int s = stack_of(gp, sp);
  if (s != stack_of(gp, entry) || sp >= entry) return false;
  return s != 0 || entry - sp < kUnknownStackSpan;
}

}  // namespace

bool signal_longjmp(const void* env, const sigset_t* saved) {
  G* gp = tls_g;
  if (!gp || gp->is_g0()) return false;
  if (__atomic_load_n(&gp->insig, __ATOMIC_RELAXED) > 0) {
    uintptr_t sp = jmpbuf_sp(env);
    int n = gp->insig < G::kSigSpKept ? gp->insig : G::kSigSpKept;
    for (int k = 0; sp && k < n; k++) {
      if (inside_handler(gp, sp, gp->sig_sp[k])) continue;
      // The jump leaves handler k and those nested in it: their frames
      // (run_program's among them) are gone.
      __atomic_store_n(&gp->insig, k, __ATOMIC_RELAXED);
      // Out of every handler: a sigwait-family call or sigsuspend the
      // first one interrupted (they wait only outside handlers) is left
      // too. Its published set would make sysmon route a process signal
      // to gp as a waiter, where nobody takes it (another thread's
      // sigtimedwait of it timed out; test sigwait_jump_out).
      if (k == 0 && gp->sigwaiting.load(std::memory_order_relaxed) != 0) signal_waiting(gp, 0);
      break;
    }
  }
  // A signal_setmask the jump leaves no longer opens anything here.
  if (M* mp = gp->m; mp && mp->open_soon.load(std::memory_order_relaxed) != 0)
    sc_store(mp->open_soon, 0);
  // Where goshim serves the G's mask calls (shim/signal_thread.cpp mask_g).
  bool own = gp->insig == 0 &&
             (gp->status.load(std::memory_order_relaxed) == GStatus::Running || gp->rt_locked);
  if (!own) return false;
  // The mask sigsetjmp saved, then (as natively on the return from that
  // mask change, or from the system call a handler came in) what is due.
  if (saved) signal_longjmp_mask(gp, saved);
  else if (gp->status.load(std::memory_order_relaxed) == GStatus::Running && signal_has_pending(gp))
    signal_deliver(gp);
  return saved != nullptr;
}

int signal_longjmp_mask(G* gp, const sigset_t* saved) {
  // glibc's sigsetjmp saved the kernel mask, in which goshim's own signals
  // are always open: for those the program's own bits stay as they are.
  uint64_t in = internal_mask();
  uint64_t n = (to_bits(saved) & ~in) | (gp->sigmask & in);
  // The jump may leave a handler the kernel entered (a fault's, on this
  // M): the kernel mask is then the one the kernel set for it, not the
  // one goshim last set (M::cur_sigmask), and must be set for sure.
  if (M* mp = gp->m) {
    uint64_t k = 0;
    sys::rt_sigprocmask(SIG_BLOCK, nullptr, &k, 8);
    __atomic_store_n(&mp->cur_sigmask, k, __ATOMIC_RELEASE);
    // gp ran here under it ("Signals raised by a call").
    if (k & kSigRaisedByCall) {
      mp->raised_owner = gp;
      mp->raised_goid = gp->goid;
    }
  }
  sigset_t set;
  from_bits(n, &set);
  return signal_setmask(gp, SIG_SETMASK, &set, nullptr);
}

void signal_init() {
  pool_init();
  jmpbuf_init();
  if (!real::lazy::sigaction()) fatal("cannot resolve sigaction");
  // What the program (or the environment) installed before goshim started.
  for (int sig = 1; sig <= 64; sig++) {
    if (sig == SIGKILL || sig == SIGSTOP || sig == kSigCancel || sig == kSigSetxid) continue;
    struct sigaction cur;
    if (real::sigaction(sig, nullptr, &cur) != 0) continue;
    if (!known[sig].load()) {
      signal_record_action(sig, &cur);
      if (sig == dump_signal() && prog_handler[sig].load() == kHandlerIgn)
        dump_sig_inherited_ign.store(true, std::memory_order_release);
    }
    if (prog_handler[sig].load() > kHandlerIgn) install_wrapper(sig);
  }
  // goshim's own signals: preemption, the dump signal, and the faults the
  // dumper guards against (each keeps the program's disposition).
  action_lock.lock();
  if (config.preempt_signal) install_wrapper(config.preempt_signal);
  install_wrapper(dump_signal());
  install_wrapper(SIGSEGV);
  install_wrapper(SIGBUS);
  action_lock.unlock();
  struct {
    void (*handler)(int, siginfo_t*, void*);
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
  } ka = {sigcancel_handler, SA_SIGINFO | SA_RESTART | kSaRestorer, goshim_restore_rt, ~0ull};  // all blocked: mid_switch
  sys::raw4(SYS_rt_sigaction, kSigCancel, (long)&ka, 0, 8);
}

void signal_record_action(int sig, const struct sigaction* act) {
  if (sig <= 0 || sig > 64 || !act) return;
  uintptr_t h = (uintptr_t)act->sa_handler;
  if (sig == dump_signal()) dump_sig_inherited_ign.store(false, std::memory_order_release);
  prog_handler[sig].store(h, std::memory_order_release);
  prog_flags[sig].store(h > kHandlerIgn ? act->sa_flags : (act->sa_flags & (SA_NOCLDSTOP | SA_NOCLDWAIT)),
                        std::memory_order_relaxed);
  prog_mask[sig].store(to_bits(&act->sa_mask), std::memory_order_relaxed);
  known[sig].store(true, std::memory_order_release);
  if (h > kHandlerIgn)
    handled_mask.fetch_or(bit(sig));
  else
    handled_mask.fetch_and(~bit(sig));
}

bool signal_has_handler(int sig) {
  return sig > 0 && sig <= 64 && prog_handler[sig].load(std::memory_order_acquire) > kHandlerIgn;
}

bool signal_handlers_all_restart() {
  for (int sig = 1; sig <= 64; sig++)
    if (prog_handler[sig].load(std::memory_order_acquire) > kHandlerIgn &&
        !(prog_flags[sig].load(std::memory_order_relaxed) & SA_RESTART))
      return false;
  return true;
}

int signal_flags(int sig) {
  if (sig <= 0 || sig > 64) return 0;
  return prog_handler[sig].load(std::memory_order_acquire) > kHandlerIgn
             ? prog_flags[sig].load(std::memory_order_relaxed)
             : 0;
}

int signal_action(int sig, const struct sigaction* act, struct sigaction* old) {
  if (sig <= 0 || sig > 64 || (act && (sig == SIGKILL || sig == SIGSTOP)) ||
      sig == kSigCancel || sig == kSigSetxid)
    return -EINVAL;
  action_lock.lock();
  struct sigaction prev;
  memset(&prev, 0, sizeof prev);
  if (known[sig].load()) {
    prev.sa_handler = (sighandler_t)prog_handler[sig].load();
    prev.sa_flags = prog_flags[sig].load();
    from_bits(prog_mask[sig].load(), &prev.sa_mask);
  } else if (real::sigaction(sig, nullptr, &prev) != 0) {
    action_lock.unlock();
    return -errno;
  }
  int r = 0;
  if (act) {
    signal_record_action(sig, act);
    bool handler = (uintptr_t)act->sa_handler > kHandlerIgn;
    // (SIG_IGN too while a G may wait for it: see ensure_wrapped.)
    bool keep_wrapper = sig == config.preempt_signal || sig == dump_signal() || sig == SIGSEGV ||
                        sig == SIGBUS ||
                        (kwrapped[sig].load() && !handler &&
                         (act->sa_handler == SIG_DFL ||
                          (act->sa_handler == SIG_IGN && sig != SIGCHLD &&
                           (waited_mask.load() & bit(sig)))));
    if (handler || keep_wrapper) {
      r = install_wrapper(sig) == 0 ? 0 : -errno;
    } else {
      r = real::sigaction(sig, act, nullptr) == 0 ? 0 : -errno;
      set_wrapped(sig, false);
    }
  }
  action_lock.unlock();
  if (act) bump_masks();
  if (old) *old = prev;
  return r;
}

// Until its first goroutine a new M is an idle one: it blocks what sysmon
// takes (signal_m_sleep_mask). Its creator's mask leaves those open when
// the creator is sysmon (it hands off the P of a goroutine in a blocking
// call and no M is idle) or a goroutine that leaves a handled signal open.
// Such an M took instances from the kernel beside sysmon while it started,
// unordered with sysmon's: a child's SIGRTMIN+1 103 held before 101, run
// first when main unblocked it (tests/preload/signals_queue, main in
// waitpid during the child's burst).
uint64_t signal_new_m_mask(uint64_t inherited) { return signal_m_sleep_mask(kmask(inherited)); }

uint64_t signal_kmask_for(M* mp, uint64_t k) { return with_fwd(mp, k); }

uint64_t signal_m_sleep_mask(uint64_t cur) {
  // Also a signal at a default action that ends the process, which sysmon
  // takes while some G leaves it open (signal_sysmon_mask): left open here,
  // this M would sleep on the mask for as long as it sleeps, and when the
  // program gave the signal a handler meanwhile it took instances from the
  // kernel beside the G that opened it, unordered with that G's
  // (tests/preload/signals_queue_rounds: its fresh rounds ran SIGRTMIN+1's
  // second value before its first).
  uint64_t take = (handled_mask.load(std::memory_order_relaxed) | wrapped_bits.load(std::memory_order_relaxed) |
                   fatal_now()) &
                  ~internal_mask();
  return cur | take;
}

void signal_m_sleep(M* mp) {
  uint64_t was = mp->cur_sigmask;
  set_kmask(mp, signal_m_sleep_mask(was));
  // sysmon may have left a signal to this M: it takes it again once no M
  // leaves it open.
  uint64_t closed = mp->cur_sigmask & ~was & sysmon_closed_by_ms.load(std::memory_order_relaxed);
  if (!closed) return;
  for (M* m = __atomic_load_n(&sched.allm, __ATOMIC_ACQUIRE); m && closed; m = m->alllink)
    if (m != mp) closed &= __atomic_load_n(&m->cur_sigmask, __ATOMIC_ACQUIRE) & ~m->open_soon.load(std::memory_order_relaxed);
  if (closed) sysmon_wake();
}

uint64_t signal_start_mask() { return ~bit(kSigSetxid); }

uint64_t signal_create_begin() {
  uint64_t all = signal_start_mask(), saved = 0;
  sys::rt_sigprocmask(SIG_SETMASK, &all, &saved, 8);
  return saved;
}

void signal_create_end(uint64_t saved) { sys::rt_sigprocmask(SIG_SETMASK, &saved, nullptr, 8); }

namespace {
// Installs want as mp's kernel sigaltstack unless it has it. On mp's
// thread, not on the stack it replaces.
inline void set_altstack(M* mp, const stack_t& want) {
  if (want.ss_sp == mp->cur_altstack.ss_sp && want.ss_size == mp->cur_altstack.ss_size &&
      !((want.ss_flags ^ mp->cur_altstack.ss_flags) & SS_DISABLE))
    return;
  stack_t ss = want;
  if (ss.ss_flags & SS_DISABLE) ss = stack_t{nullptr, SS_DISABLE, 0};
  if (sys::raw2(SYS_sigaltstack, (long)&ss, 0) == 0) mp->cur_altstack = want;
}
}  // namespace

void signal_apply(M* mp, G* gp) {
  // (What a G that left this M was about to open: sysmon_close_wait.)
  if (__builtin_expect(mp->open_soon.load(std::memory_order_relaxed) != 0, 0))
    sc_store(mp->open_soon, 0);
  set_kmask(mp, kmask(gp->sigmask), gp);
  // The G's own alternate stack, else the M's (M::sigstk).
  set_altstack(mp, (gp->altstack.ss_flags & SS_DISABLE) ? mp->sigstk : gp->altstack);
}

void signal_apply_resume(M* mp, G* gp) {
  // On g0, or on the stack of the G park's direct hand-off switched to
  // (park_switch_post: gp must not park after all); never on gp's own.
  GOSHIM_DCHECK(getg() && getg() != gp, "contract: signal_apply_resume on the resuming G's stack");
  uintptr_t lo = (uintptr_t)gp->altstack.ss_sp;
  if (__builtin_expect(!(gp->altstack.ss_flags & SS_DISABLE), 0) && gp->sched_sp > lo &&
      gp->sched_sp <= lo + gp->altstack.ss_size) {
    // gp resumes on its alternate stack, inside a handler: once that stack
    // is installed, a signal taken here on g0 would be pushed at its top,
    // over gp's live frames. Every signal stays blocked until gp's own
    // rt_sigreturn (async_preempt set the mask in its frame) or its next
    // signal_apply sets the mask.
    signal_block_all(mp);
    stack_t ss = gp->altstack;
    if (mp->cur_altstack.ss_sp != ss.ss_sp || mp->cur_altstack.ss_size != ss.ss_size ||
        (mp->cur_altstack.ss_flags & SS_DISABLE)) {
      if (sys::raw2(SYS_sigaltstack, (long)&ss, 0) == 0) mp->cur_altstack = gp->altstack;
    }
    return;
  }
  signal_apply(mp, gp);
}

bool signal_on_altstack(M* mp) {
  if (mp->cur_altstack.ss_flags & SS_DISABLE) return false;
  uintptr_t sp = arch::get_sp(), lo = (uintptr_t)mp->cur_altstack.ss_sp;
  return sp >= lo && sp < lo + mp->cur_altstack.ss_size;
}

void signal_block_all(M* mp) {
  uint64_t all = ~0ull;
  sys::rt_sigprocmask(SIG_SETMASK, &all, nullptr, 8);
  __atomic_store_n(&mp->cur_sigmask, all, __ATOMIC_RELEASE);
}

void signal_leave_altstack(M* mp) {
  if (__builtin_expect(mp->cur_altstack.ss_sp == mp->sigstk.ss_sp &&
                           !((mp->cur_altstack.ss_flags ^ mp->sigstk.ss_flags) & SS_DISABLE),
                       1))
    return;
  set_altstack(mp, mp->sigstk);
}

// ---- The M's signal stack ------------------------------------------------------
//
// goshim's preemption signal is SA_ONSTACK, and so are the program's
// handlers installed with it. The kernel pushes such a frame (the full
// xsave area: several KiB with AVX-512) on the thread's sigaltstack, else
// below the interrupted stack pointer. A goroutine without a sigaltstack
// of its own would get the preemption signal's frame below its stack
// pointer, where natively no signal lands: a program running close to the
// end of a small stack crashed (tests/preload/sigstack_deep). So every M
// has a signal stack of its own (M::sigstk, as Go's gsignal), installed
// whenever the G it runs has no sigaltstack (signal_apply) and on g0; a
// G's own sigaltstack is installed while that G runs, as before.
//
// A frame on the M's stack belongs to the M: the G must never be switched
// out, park or unwind while its handler runs there (it could resume on
// another M, whose signal stack this is not, while this M takes another
// signal there). signal_handler therefore moves the frame (siginfo,
// context, xsave area: arch::sigframe_copy) onto the G's stack, below the
// interrupted stack pointer and its red zone, exactly where the kernel
// would have pushed it without an alternate stack, and enters itself again
// there (goshim_sigframe_enter), before anything that may switch: goshim's
// preemption switch (only on the G's own stack, with kSigframeReserve
// bytes left above its guard for the handler's own frames), a delivery
// kick, an asynchronous cancellation, and every program handler (a
// program's SA_ONSTACK handler for a thread without a sigaltstack runs on
// the thread's stack natively, and may block). Where the frame cannot be
// moved (no room above the guard, or a signal nested in goshim's handler
// on this stack), the handler stays on the M's stack and does nothing
// that may switch: no preemption switch (the G yields at its next
// interposed call), the program's signal stays pending on the G
// (delivered at its next delivery point), a fault the program handles
// gets its default action (the kernel could not have pushed the frame
// either).
//
// rt_sigreturn sets the thread's sigaltstack from the frame's uc_stack:
// every handler frame of a G that may have moved to another M meanwhile
// gets that M's current one written there (fix_uc_stack).

namespace {
size_t m_sigstk_size() {
  static size_t size = 0;
  if (size) return size;
  // The largest frame the kernel pushes on this CPU (AT_MINSIGSTKSZ, Linux
  // 5.14+; else a bound above AVX-512's), room for nested frames (faults
  // and the credential broadcast in goshim's handler) and for the handler
  // itself (a libunwind walk for a dump or an asynchronous cancellation).
  size_t frame = (size_t)getauxval(51 /* AT_MINSIGSTKSZ */);
  if (!frame) frame = 16384;
  size_t n = 4 * frame + 64 * 1024;
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size = (n + pg - 1) & ~(pg - 1);
  return size;
}
}  // namespace

bool signal_m_stack_alloc(M* mp) {
  if (!arch::kSigframeMove) return false;
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t size = m_sigstk_size();
  void* p = sys::mmap(nullptr, size + pg, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  sys::mprotect(p, pg, PROT_NONE);  // the guard
  mp->sigstk_map = p;
  mp->sigstk_maplen = size + pg;
  mp->sigstk = stack_t{(char*)p + pg, 0, size};
  return true;
}

void signal_m_stack_install(M* mp) {
  if (mp->sigstk.ss_flags & SS_DISABLE) return;
  set_altstack(mp, mp->sigstk);
}

void signal_m_stack_free(M* mp) {
  GOSHIM_ON_G0();
  if (!mp->sigstk_map) return;
  // Off first (a signal on the way out is then pushed on g0's stack).
  uint64_t all = ~0ull, old = 0;
  sys::rt_sigprocmask(SIG_SETMASK, &all, &old, 8);
  set_altstack(mp, stack_t{nullptr, SS_DISABLE, 0});
  if (mp->cur_altstack.ss_flags & SS_DISABLE) {
    sys::munmap(mp->sigstk_map, mp->sigstk_maplen);
    mp->sigstk_map = nullptr;
    mp->sigstk = stack_t{nullptr, SS_DISABLE, 0};
  }
  sys::rt_sigprocmask(SIG_SETMASK, &old, nullptr, 8);
}

int signal_setmask(G* gp, int how, const sigset_t* set, sigset_t* old) {
  uint64_t cur = gp->sigmask;
  if (old) from_bits(cur, old);
  if (!set) return 0;
  uint64_t s = to_bits(set), n;
  switch (how) {
    case SIG_BLOCK:
      n = cur | s;
      break;
    case SIG_UNBLOCK:
      n = cur & ~s;
      break;
    case SIG_SETMASK:
      n = s;
      break;
    default:
      return EINVAL;
  }
  // Like glibc and the kernel: these are never blocked.
  n &= ~(bit(SIGKILL) | bit(SIGSTOP) | bit(kSigCancel) | bit(kSigSetxid));
  // A signal some G blocks must be routed even when it hits a stale M.
  for (uint64_t nb = n & ~cur; nb; nb &= nb - 1) ensure_wrapped(__builtin_ctzll(nb) + 1);
  // Newly unblocked: take process signals goshim holds and deliver what is
  // due before the kernel mask opens, so that they come before the
  // instances still queued in the kernel (which are newer), as natively.
  // sysmon takes none of them from here on, and holds what it took
  // (sysmon_close_wait); they are claimed while gp still blocks them, so
  // that sysmon does not route them here meanwhile (a forward in flight
  // would keep drop_kernel_dup from merging a standard one).
  uint64_t unblocked = cur & ~n;
  M* opener = unblocked ? gp->m : nullptr;
  uint64_t soon = opener ? sysmon_close_wait(opener, unblocked, gp->insig == 0) : 0;
  if (unblocked) {
    uint64_t take = proc_pending.load(std::memory_order_acquire) & unblocked;
    if (take) {
      uint64_t got = proc_pending.fetch_and(~take, std::memory_order_acq_rel) & take;
      gp->sigpending_proc.fetch_or(got);
      gp->sigpending.fetch_or(got);
    }
  }
  gp->sigmask = n;
  if (n != cur) account_mask_change(cur, n);
  // sysmon opens a wrapped signal at its default action only while some G
  // leaves it open (signal_route), and so one that ends the process by
  // default (which an M sleeping idle blocks: signal_m_sleep_mask).
  if (uint64_t ch = (cur ^ n) & ~handled_mask.load(std::memory_order_relaxed) & ~internal_mask())
    if (ch & (wrapped_bits.load(std::memory_order_relaxed) | fatal_now())) bump_masks();
  // (Also process signals sysmon routed here meanwhile, their forwards
  // still on the way: the loop delivers them in order with the rest.)
  if (signal_has_pending(gp) || (gp->sigpending_proc.load(std::memory_order_acquire) & ~gp->sigmask))
    signal_deliver(gp);
  if (M* mp = gp->m) set_kmask(mp, kmask(gp->sigmask), gp);
  if (soon) opener->open_soon.fetch_and(~soon, std::memory_order_seq_cst);
  // A SIGPIPE or SIGXFSZ of gp's own the mask change took from its M's
  // kernel thread as it opened (hand_stale_raised): delivered before the
  // call returns, as the kernel would have.
  if ((unblocked & kSigRaisedByCall) && signal_has_pending(gp)) signal_deliver(gp);
  return 0;
}

namespace {
void drop_kernel_dup(G* gp, int sig);
}  // namespace

namespace {
struct DeliverArgs {
  int sig;
  siginfo_t* si;
  ucontext_t* uc;
  G* gp;
};
void run_program_on_altstack(void* arg) {
  DeliverArgs* a = (DeliverArgs*)arg;
  run_program(a->sig, a->si, a->uc, a->gp);
}
// Whether the caller (gp) runs on gp's alternate signal stack.
bool on_altstack(G* gp) {
  uintptr_t sp = arch::get_sp(), lo = (uintptr_t)gp->altstack.ss_sp;
  return sp >= lo && sp < lo + gp->altstack.ss_size;
}
}  // namespace

void signal_sent_to_self(G* gp, int sig, uint32_t handled0) {
  if (sig <= 0 || sig > 64 || gp->insig || !gp->m) return;
  uint64_t b = bit(sig);
  if ((gp->sigmask & b) || (internal_mask() & b)) return;
  if (__atomic_load_n(&gp->nhandled, __ATOMIC_ACQUIRE) != handled0) return;  // a handler ran on gp
  // The kernel starts its choice at the leader: while the main G would
  // take sig, the kernel wakes the first thread for it, not the caller,
  // and the call returns without a handler here (POSIX asks for one only
  // when no other thread leaves sig open). goshim holds that instance for
  // the main G (signal_here's Defer) until sysmon routes it there: taken
  // here instead, it ran on the caller, and the main thread's wait went on
  // for as long as the caller kept sending (tests/preload/eintr_handler_ran
  // at one processor: 70-120 s, each kill's instance run on the sender).
  G* lead = main_g();
  if (gp != lead && leader_state_takes(lead, sig)) return;
  // Another kernel thread took it: once sysmon_sync returns its handler
  // has held it for goshim (or routed it to gp), where signal_deliver
  // takes it. Exact: that thread may wait for a CPU between the kernel's
  // dequeue and its handler for longer than any bound (kill_self_sync
  // returned before the handler 1 run in 12 at the default under
  // stress-ng with the 10 ms one).
  sysmon_sync(gp->m, b, true);
  signal_deliver(gp);
}

void signal_deliver(G* gp) {
again:
  // gp->m is read afresh where it is used: a handler may park (it should
  // not, but it may), and a local live across getcontext could be
  // clobbered if the program returns through the saved context.
  if (!gp->m || gp->insig || __atomic_load_n(&gp->delivering, __ATOMIC_RELAXED)) return;
  // From choosing a signal until its handler runs, a delivery nested here
  // (goshim's preemption or kick handler interrupting this G) would find
  // the chosen signal's pending bit cleared, or its oldest instance taken,
  // and run a later one first: lowest number first and each real-time
  // signal's instances in sending order, as the kernel delivers them
  // (tests/preload/signals_rt_many). Such a delivery leaves them to this
  // loop, which looks again after every handler.
  __atomic_store_n(&gp->delivering, true, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  volatile int ahead = 0;  // looks below the next held instance ("The kernel's order across takers")
  for (;;) {
    // Process signals goshim holds for the process that gp leaves open: gp
    // takes them now, as the kernel gives a process signal to a thread that
    // leaves it open (sysmon would route them to some G later, after
    // instances of higher signals gp delivers meanwhile).
    uint64_t open = ~gp->sigmask & ~internal_mask();
    if (uint64_t c = proc_pending.load(std::memory_order_acquire) & open) {
      uint64_t got = proc_pending.fetch_and(~c, std::memory_order_acq_rel) & c;
      gp->sigpending_proc.fetch_or(got, std::memory_order_acq_rel);
      gp->sigpending.fetch_or(got, std::memory_order_acq_rel);
    }
    // (A claim alone, without the pending bit, is one sysmon forwards to
    // gp's M: gp takes the instance here and the forward finds it gone.)
    uint64_t claimed = gp->sigpending_proc.load(std::memory_order_acquire);
    uint64_t due = (gp->sigpending.load(std::memory_order_acquire) | claimed) & ~gp->sigmask;
    if (!due) {
      // A kick that came after the last look found this mark: look once
      // more without it.
      __atomic_signal_fence(__ATOMIC_SEQ_CST);
      __atomic_store_n(&gp->delivering, false, __ATOMIC_RELAXED);
      __atomic_signal_fence(__ATOMIC_SEQ_CST);
      if (!((gp->sigpending.load(std::memory_order_acquire) |
             gp->sigpending_proc.load(std::memory_order_acquire)) &
            ~gp->sigmask))
        break;
      __atomic_store_n(&gp->delivering, true, __ATOMIC_RELAXED);
      __atomic_signal_fence(__ATOMIC_SEQ_CST);
      continue;
    }
    int sig = __builtin_ctzll(due) + 1;
    uint64_t b = bit(sig);
    if ((claimed & b) && ahead < 16) {
      // goshim's oldest instance of a process signal. The lower signals gp
      // leaves open come first, as the kernel dequeues them: those another
      // thread took from the kernel are held once sysmon_sync returns (gp
      // claims them above), and those still in the kernel are delivered
      // here by the kernel as this M's mask opens (goshim's older instances
      // of them first, older_held). Bounded: a sender may keep sending.
      M* mp = gp->m;
      // (A forward in flight to this M shows as pending too: opening the
      // mask lets it arrive, and it leaves its signal to this loop.)
      uint64_t lower = open & (b - 1) & wrapped_bits.load(std::memory_order_acquire);
      // The kernel first, then sysmon_sync: a lower instance another thread
      // took after that look was sent after it (this delivery comes first).
      if (lower) {
        ahead = ahead + 1;
        uint64_t k = 0;
        if (sys::raw2(SYS_rt_sigpending, (long)&k, 8) == 0 && (k & lower)) {
          uint64_t km = with_fwd(mp, kmask(gp->sigmask));
          sys::rt_sigprocmask(SIG_SETMASK, &km, nullptr, 8);
          __atomic_store_n(&mp->cur_sigmask, km, __ATOMIC_RELEASE);
          continue;
        }
        sysmon_sync(mp, lower);
        if (proc_pending.load(std::memory_order_acquire) & lower) continue;
      }
    }
    bool thread_pending = gp->sigpending.fetch_and(~b, std::memory_order_acq_rel) & b;
    siginfo_t si;
    if (gp->sigpending_proc.fetch_and(~b, std::memory_order_acq_rel) & b) {
      if (!take_proc(gp, sig, &si, true)) continue;  // another G took it
    } else if (!thread_pending || !thread_info(gp, sig, &si)) {
      continue;
    }
    ahead = 0;
    // As the kernel would: the handler runs now, on this G, with its
    // sa_mask and the signal itself blocked (on the M too).
    ucontext_t uc;
    getcontext(&uc);
    uint64_t during = kmask(gp->sigmask | prog_blocks(sig));
    set_kmask(gp->m, during, gp);
    if ((prog_flags[sig].load() & SA_RESETHAND) && prog_handler[sig].load() > kHandlerIgn) {
      struct sigaction dfl;
      memset(&dfl, 0, sizeof dfl);
      dfl.sa_handler = SIG_DFL;
      real::sigaction(sig, &dfl, nullptr);
    }
    // As the kernel: an SA_ONSTACK handler runs on the thread's alternate
    // signal stack, unless the thread runs there already.
    if ((prog_flags[sig].load(std::memory_order_relaxed) & SA_ONSTACK) &&
        !(gp->altstack.ss_flags & SS_DISABLE) && !on_altstack(gp)) {
      uc.uc_stack = gp->altstack;
      DeliverArgs a{sig, &si, &uc, gp};
      goshim_call_on_stack(&a, run_program_on_altstack,
                           (uintptr_t)gp->altstack.ss_sp + gp->altstack.ss_size);
    } else {
      run_program(sig, &si, &uc, gp);
    }
  }
  // The G's own mask again, once nothing more is due: a signal still
  // queued in the kernel comes after those goshim delivered here.
  set_kmask(gp->m, kmask(gp->sigmask), gp);
  // One of gp's own writes in a handler whose sa_mask blocked SIGPIPE or
  // SIGXFSZ, taken from the M as the mask opened: due now, as natively.
  // (A loop, not a call: a handler that raises it again each time loops
  // natively too, and must not grow the stack here.)
  if (gp->sigpending.load(std::memory_order_acquire) & kSigRaisedByCall & ~gp->sigmask) goto again;
}

// Interrupts target where it runs (user code or a blocking call), as the
// kernel would a thread: the signal goes to its M, marked for target.
// proc: a process signal routed by sysmon (the handler takes its siginfo
// from held[]; the tgkill itself carries none).
static bool send_to_running(G* target, int sig, const union sigval* value, bool proc) {
  M* mp = target->m;
  if (!mp || mp->tid <= 0) return false;
  G* mark = (G*)((uintptr_t)target | (proc ? 1 : 0));
  uint64_t b = bit(sig);
  sc_store(mp->sigfwd[sig], mark);
  mp->fwd_bits.fetch_or(b, std::memory_order_seq_cst);
  // Dekker with the M (with_fwd, "Forwards" above): target still on mp
  // now means that mp reads the bit at its next mask change, so the
  // forward cannot stay pending there behind a blocking mask.
  if (__atomic_load_n(&target->m, __ATOMIC_SEQ_CST) != mp) {
    G* expect = mark;
    if (mp->sigfwd[sig].compare_exchange_strong(expect, nullptr, std::memory_order_seq_cst))
      fwd_clear(mp, sig);
    return false;
  }
  long r;
  if (value) {
    r = signal_send_queued(mp->tid, sig, *value);
  } else {
    r = sys::tgkill(sys::getpid(), mp->tid, sig);
  }
  if (r != 0) {
    G* expect = mark;
    if (mp->sigfwd[sig].compare_exchange_strong(expect, nullptr, std::memory_order_seq_cst))
      fwd_clear(mp, sig);
    return false;
  }
  return true;
}

// Signal-safe. Thread-directed signal sig is pending on gp, and gp runs
// or is in a blocking call, or was when that was last read: forwards the
// oldest instance to gp's M. A forward can miss: gp switched out of the M
// it was sent to (send_to_running fails; or the tgkill reaches that M
// after gp left it, SigHere::ForOther), and gp may then run again on
// another M, past the look at its pending signals that a G makes there. A
// G computing without calls has no other delivery point: the signal stayed
// recorded on it, undelivered (tests/preload/sigstack_handler_block hung
// so, about 1 run in 40 at two processors with glibc 2.41's timing). So the
// signal goes back on gp (seq_cst), and while gp still runs it is
// forwarded again to its current M. Dekker with the G's resumption: it is
// on its M and Running, then (after a seq_cst read-modify-write in
// set_kmask) looks at sigpending; a status read here that finds it not
// running means that look comes after the store here. A few tries, then a
// delivery kick where it runs (the kick, not a forward, also while a
// forward of sig is in flight to that M: a second mark would overwrite the
// first, SigRoute::kind).
static void reach_running(G* gp, int sig) {
  uint64_t b = bit(sig);
  for (int tries = 0;; tries++) {
    GStatus st = gp->status.load(std::memory_order_seq_cst);
    if (st != GStatus::Running && st != GStatus::Syscall) return;  // it looks when it next runs
    M* mp = __atomic_load_n(&gp->m, __ATOMIC_SEQ_CST);
    // gp on the caller's own M (a handler there, ForOther): gp is being
    // switched out of it, and resumes after this handler returns, looking
    // at its pending signals then. A forward to this very thread would
    // arrive the moment the handler returns, before the switch could take
    // one step, and be handed on again: a livelock (sigstack_handler_block
    // hung so in the first version of this).
    G* self = tls_g;
    if (mp && self && self->m == mp && self != gp) return;
    if (tries == 64 || (mp && mp->sigfwd[sig].load(std::memory_order_seq_cst) != nullptr)) {
      if (gp->sigpending.load(std::memory_order_seq_cst) & b)
        preempt_kick(gp, false);  // any delivery of the preemption signal delivers what is pending
      return;
    }
    if (!(gp->sigpending.fetch_and(~b, std::memory_order_seq_cst) & b)) return;  // gp took it
    siginfo_t si;
    if (!thread_info(gp, sig, &si)) return;
    bool queued = si.si_code == SI_QUEUE;
    if (send_to_running(gp, sig, queued ? &si.si_value : nullptr, false)) return;
    // Back at the head of gp's queue, as it was (the oldest instance).
    if (queued || sig >= kSigRtMin) gq_push_front(gp, sig, &si);
    gp->sigpending.fetch_or(b, std::memory_order_seq_cst);
    g_unrouted.store(true, std::memory_order_release);
    sysmon_wake();
    for (int i = 0; i < 64; i++) arch::cpu_relax();
  }
}

// An instance just queued on target (incarnation goid) that target's exit
// may have missed: its exit marks it exiting (sig_exiting), then drops
// what is queued on it (pool_drop); a push seen before the mark is
// dropped there, one after it is dropped here. Natively the thread's
// pending signals go with it.
bool exited_after_push(G* target, uint64_t goid) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!target->sig_exiting.load(std::memory_order_seq_cst)) return false;
  pool_drop(target, goid);
  return true;
}

int signal_send(G* target, int sig, const union sigval* value) {
  if (sig < 0 || sig > 64) return EINVAL;
  if (sig == 0) return 0;
  if (sig == kSigCancel || sig == kSigSetxid) return EINVAL;
  // An exited thread (not joined yet): glibc's pthread_kill does not send
  // (the tid may name another thread by now) and returns 0. An instance
  // queued on the dead G would sit in the pool until its slot is reused.
  if (thread_exited(target)) return 0;
  uint64_t goid = target->goid;
  uint64_t b = bit(sig);
  if (sig >= kSigRtMin) {
    // Real-time: every instance queues; EAGAIN where the kernel's queue
    // would refuse it (RLIMIT_SIGPENDING: tgkill and rt_tgsigqueueinfo
    // both, their si_code being negative).
    if (!gq_push(target, sig, value ? SI_QUEUE : SI_TKILL, value)) return EAGAIN;
    if (exited_after_push(target, goid)) return 0;
  } else if (value) {
    // Standard: one pending instance; a second one is dropped. Never
    // EAGAIN: past the limit the kernel makes it pending without its
    // siginfo ("silent loss of information"); here it is pending without
    // a queued instance, taken as pthread_kill's (SI_TKILL, not SI_USER
    // from pid 0 as natively).
    if (target->sigpending.load(std::memory_order_acquire) & b) return 0;
    gq_push(target, sig, SI_QUEUE, value);
    if (exited_after_push(target, goid)) return 0;
  }
  G* self = tls_g;
  // Pending first, then the waited set (Dekker with wait_for and suspend
  // in the shim: they publish the set, then look for pending signals):
  // either the waiter finds the bit or this sees it waiting and wakes it.
  target->sigpending.fetch_or(b, std::memory_order_seq_cst);
  // In the kernel's sigsuspend inside a program handler (signal_ksuspend):
  // the kernel wakes it, so the signal goes to its M whatever the G's own
  // mask and waited set (those of the code the handler interrupted) say.
  bool ksusp = target->ksuspend_open.load(std::memory_order_seq_cst) & b;
  if (!ksusp && (target->sigwaiting.load(std::memory_order_seq_cst) & b)) {
    signal_note_interrupt(target, sig);
    signal_wake_waiter(target);
    return 0;
  }
  if (!ksusp && (target->sigmask & b)) return 0;  // delivered when it unblocks it
  if (target == self) {
    signal_deliver(self);
    return 0;
  }
  GStatus st = target->status.load(std::memory_order_acquire);
  if ((st == GStatus::Running || st == GStatus::Syscall) && sig == config.preempt_signal) {
    // goshim's preemption requests are this signal too, and a standard
    // signal has one pending slot per thread in the kernel: a tgkill of
    // the program's arriving while one is pending there would be dropped
    // (a handshake test lost SIGURG, tests/preload/sigstack_handler_block).
    // It stays pending on target, and a delivery kick delivers it where
    // target runs (any delivery of goshim's preemption signal delivers
    // what is pending, so a kick merged with a request is not lost).
    preempt_kick(target, false);
    return 0;
  }
  if (st == GStatus::Running || st == GStatus::Syscall) {
    // The oldest queued instance goes to its M (the kernel queues
    // real-time ones there in turn).
    reach_running(target, sig);
    return 0;
  }
  if (st == GStatus::Waiting) {
    signal_note_interrupt(target, sig);
    interrupt_wait(target);
  }
  return 0;  // Runnable: it delivers when it next runs
}

void signal_claim_raised(G* gp, uint64_t set, Raised how, const uint64_t* kpending) {
  GOSHIM_ON_USER_G();
  M* mp = gp->m;
  if (!mp) return;
  // A forward in flight to this M opens its signal in the kernel mask: the
  // handler has had (or routes) whatever the kernel made pending for it.
  set &= kSigRaisedByCall & gp->sigmask & ~internal_mask() & ~mp->fwd_bits.load(std::memory_order_seq_cst);
  if (!set) return;
  uint64_t k = 0;
  if (kpending) {
    k = *kpending;
  } else if (sys::raw2(SYS_rt_sigpending, (long)&k, 8) != 0) {
    return;
  }
  // One gp has pending already (claimed before in the same call: a
  // blocking write's) stays; another the kernel has is not gp's to merge.
  set &= ~gp->sigpending.load(std::memory_order_acquire);
  k &= set;
  // Right after the write that raised it, this thread's own instance is
  // there and is taken first; otherwise only one pending on this thread
  // itself is gp's (a process-wide one is the process's).
  if (k && how != Raised::Now) k = thread_private_pending(k, how == Raised::Mine ? k : 0);
  move_raised(gp, gp->goid, k);
}

void signal_pending_set(G* gp, sigset_t* out) {
  sigset_t k;
  sigemptyset(&k);
  sys::raw2(SYS_rt_sigpending, (long)&k, 8);
  if (gp) {
    uint64_t kb = to_bits(&k);
    if (kb & kSigRaisedByCall & gp->sigmask) {
      signal_claim_raised(gp, kSigRaisedByCall, Raised::Mine, &kb);
      sigemptyset(&k);
      sys::raw2(SYS_rt_sigpending, (long)&k, 8);
    }
  }
  uint64_t v = to_bits(&k) | proc_pending.load() | (gp ? gp->sigpending.load() : 0);
  // A process signal gp blocks that sysmon (or an M on g0) took from the
  // kernel before the look above may still be on its way into what goshim
  // holds: dequeued, its handler not run yet. Natively it is pending (a
  // thread that blocks SIGUSR1 and kill()s its own process finds it in
  // sigpending: stress-ng's sigpending stressor failed "did not get a
  // SIGUSR1 pending signal" a few times in 200,000). Those handlers have
  // run once sysmon_sync returns.
  if (gp) {
    uint64_t missing = gp->sigmask & ~v & ~internal_mask();
    if (missing) {
      // Exact outside a program handler (see wait_stale_ms); inside one,
      // the code it interrupted may hold what such a thread waits for.
      sysmon_sync(gp->m, missing, gp->insig == 0);
      v |= proc_pending.load() | gp->sigpending.load();
    }
  }
  from_bits(v & ~internal_mask(), out);
}

namespace {
// The kernel dequeues the lowest-numbered pending signal first and, for
// one signal, its instances in sending order. Part of a burst may be held
// by goshim (taken from the kernel by sysmon or an M and deferred) while
// the rest is still queued in the kernel, where sysmon takes it one
// instance at a time while some G waits for it: taking only from what
// goshim holds returned a higher signal held while older instances of a
// lower one were still in the kernel (RTMIN+2 before the rest of RTMIN+1).
// So a held process signal sig is taken only once no signal of set below
// it is pending in the kernel (goshim's instances of sig itself are older
// than the kernel's) and no handler is on its way to hold one
// (deferring). Signals with a forward mark on gp's M are not counted (their
// instance pending on this thread is a forward, not a process signal).
// Only sysmon takes them from the kernel meanwhile, one at a time, so they
// reach the held queue in the kernel's order.
bool kernel_ahead(G* gp, uint64_t set, int sig) {
  if (deferring.load(std::memory_order_seq_cst) != 0) return true;
  uint64_t below = set & (bit(sig) - 1) & ~internal_mask();
  if (M* mp = gp->m) below &= ~mp->fwd_bits.load(std::memory_order_seq_cst);
  if (!below) return false;
  uint64_t k = 0;
  if (sys::raw2(SYS_rt_sigpending, (long)&k, 8) != 0) return false;
  return (k & below) != 0;
}

// gp took goshim's instance of standard process signal sig. One the
// kernel also has pending was sent while goshim held that one: natively
// it would have found sig pending and been dropped, so it is dropped now
// (a burst of kill() gave the program a second one).
void drop_kernel_dup(G* gp, int sig) {
  if (sig >= kSigRtMin) return;
  uint64_t b = bit(sig);
  if (M* mp = gp->m; !mp || (mp->fwd_bits.load(std::memory_order_seq_cst) & b)) return;
  uint64_t k = 0;
  if (sys::raw2(SYS_rt_sigpending, (long)&k, 8) != 0 || !(k & b)) return;
  struct timespec zero = {0, 0};
  siginfo_t si;
  sys::raw4(SYS_rt_sigtimedwait, (long)&b, (long)&si, (long)&zero, 8);
}

// The lowest process signal of set goshim holds for gp (claimed by it or
// held for the process), or 0.
int lowest_held(G* gp, uint64_t set) {
  uint64_t v = ((gp->sigpending.load(std::memory_order_acquire) &
                 gp->sigpending_proc.load(std::memory_order_acquire)) |
                proc_pending.load(std::memory_order_acquire)) & set;
  return v ? __builtin_ctzll(v) + 1 : 0;
}
}  // namespace

// Process signal sig claimed by gp, which gp can no longer take (it
// blocks it and does not wait for it): back to the process, for sysmon to
// route (its instances stay in held[], oldest first). Whoever clears the
// pending bit first takes the claim, as a taker does (signal_take,
// signal_deliver: the pending bit, then the claim), so that a take under
// way finds it gone rather than half there (a standard signal's bit
// alone reads as a pthread_kill). A thread-directed instance queued on gp
// keeps the bit (a standard one sent without siginfo shares it with the
// claim, as everywhere a claim is taken). True if it went back.
namespace {
bool give_back_claim(G* gp, int sig) {
  uint64_t b = bit(sig);
  if (!(gp->sigpending.fetch_and(~b, std::memory_order_seq_cst) & b)) return false;
  bool got = gp->sigpending_proc.fetch_and(~b, std::memory_order_seq_cst) & b;
  if (pool_find((uintptr_t)gp, gp->goid, sig)) gp->sigpending.fetch_or(b, std::memory_order_acq_rel);
  if (!got) return false;
  proc_pending.fetch_or(b, std::memory_order_acq_rel);
  g_unrouted.store(true, std::memory_order_release);
  return true;
}
}  // namespace

int signal_take(G* gp, uint64_t set, siginfo_t* info, bool wait_kernel) {
  // It may spin on the kernel for sysmon (wait_kernel), holding its P.
  GOSHIM_ON_USER_G();
  GOSHIM_NO_LOCKS("signal_take");
  siginfo_t dummy;
  if (!info) info = &dummy;
  // Each turn chooses one signal and takes exactly that one; if its
  // instance is gone by then (another taker had it, or its pending bit
  // outlived it), it chooses again. What was looked at to choose it (the
  // kernel's queue and the instances on their way into goshim, below it)
  // says nothing about a higher one: taking the next higher signal held
  // instead returned SIGRTMIN+2 while SIGRTMIN+1's next instance was still
  // in the kernel or in sysmon's handler (its held bit had outlived the
  // instance before it: tests/preload/signals_queue_rounds).
  for (;;) {
    // Thread-directed signals pending on gp come first, as the kernel
    // dequeues a thread's own pending signals before the process's.
    uint64_t thr = gp->sigpending.load(std::memory_order_seq_cst) &
                   ~gp->sigpending_proc.load(std::memory_order_seq_cst) & set;
    if (thr) {
      int sig = __builtin_ctzll(thr) + 1;
      uint64_t b = bit(sig);
      if (gp->sigpending_proc.load(std::memory_order_acquire) & b) continue;  // claimed meanwhile: below
      if (!(gp->sigpending.fetch_and(~b, std::memory_order_acq_rel) & b)) continue;
      if (gp->sigpending_proc.fetch_and(~b) & b) {
        if (take_proc(gp, sig, info, false)) return sig;
        continue;  // another G took it
      }
      if (thread_info(gp, sig, info)) return sig;
      continue;
    }
    // Process signals, the lowest first, whether sysmon already routed
    // them to gp (claimed) or they are still held for the process.
    int low = lowest_held(gp, set);
    for (int pass = 0; low && pass < 16; pass++) {
      if (kernel_ahead(gp, set, low)) {
        if (!wait_kernel) return -1;
        // sysmon, which receives what gp waits for (its set is published),
        // takes the older ones from the kernel; bounded, in case one stays
        // pending on this thread where no one else can take it.
        for (int i = 0; i < 20000; i++) {
          sysmon_wake();
          spin_yield();
          low = lowest_held(gp, set);
          if (!low || !kernel_ahead(gp, set, low)) break;
        }
        continue;
      }
      // None below low in the kernel now. One another thread took from it
      // before this look is held once sysmon_sync returns ("The kernel's
      // order across takers"); one taken after it was sent after it.
      uint64_t below = set & (bit(low) - 1);
      if (!below) break;
      sysmon_sync(gp->m, below);
      int again = lowest_held(gp, set);
      if (again == low) break;
      low = again;
    }
    if (!low) {
      if (gp->sigpending.load(std::memory_order_seq_cst) & set) continue;  // a thread-directed one came
      return 0;
    }
    uint64_t b = bit(low);
    uint64_t claimed = gp->sigpending.load(std::memory_order_seq_cst) &
                       gp->sigpending_proc.load(std::memory_order_seq_cst);
    if ((claimed & b) && (gp->sigpending.fetch_and(~b, std::memory_order_acq_rel) & b)) {
      bool proc = gp->sigpending_proc.fetch_and(~b) & b;
      if (proc ? take_proc(gp, low, info, false) : thread_info(gp, low, info)) return low;
    }
    if ((proc_pending.fetch_and(~b, std::memory_order_acq_rel) & b) && take_proc(gp, low, info, false))
      return low;
  }
}

void signal_wake_waiter(G* gp) {
  __atomic_fetch_add(&gp->sigwait_word, 1, __ATOMIC_SEQ_CST);
  sema_wake(&gp->sigwait_word, 1);
}

// On gp, once its sigwait has withdrawn its set (signal_waiting(gp, 0))
// and taken what it returns: a process signal sysmon routed to gp for
// that wait (claimed, sigpending_proc) that gp blocks and did not take
// goes back to the process, as natively it stays pending for whichever
// thread takes it next. Left on gp, it was gp's alone: a wait that
// returned another signal (gp's own thread-directed ones come first), or
// ended just as sysmon routed it (signal_route re-checks the set for
// that), kept it from every other thread while gp waited elsewhere; and
// sysmon, holding that signal (sysmon_hold) until its instance is taken,
// left the kernel's newer instances of it queued, so that another G's
// sigtimedwait for a higher signal waited for them to be taken
// (kernel_ahead) on every call (review_sq27 H1: a zero-timeout loop that
// spun for minutes; tests/preload/sigwait_proc_left).
void signal_wait_done(G* gp) {
  // Dekker with signal_route: it claims (the claim, then the pending bit),
  // then reads sigwaiting; gp withdrew its set before this look. Either
  // this look finds both bits or sysmon finds the set withdrawn and gives
  // the claim back itself. (A claim without its pending bit is sysmon's
  // to finish.)
  uint64_t left = gp->sigpending_proc.load(std::memory_order_seq_cst) &
                  gp->sigpending.load(std::memory_order_seq_cst) &
                  __atomic_load_n(&gp->sigmask, __ATOMIC_SEQ_CST) &
                  ~gp->sigwaiting.load(std::memory_order_seq_cst) & ~internal_mask();
  bool any = false;
  for (; left; left &= left - 1) any |= give_back_claim(gp, __builtin_ctzll(left) + 1);
  if (any) sysmon_wake();
}

void signal_waiting(G* gp, uint64_t set) {
  if (set) {
    // Signals nobody else may take (blocked everywhere, default action):
    // goshim must see them to hand them over. Wrapped before the set is
    // published: sysmon opens what a G waits for at any look that reads
    // the set (another G's mask change starts one), and one at its
    // default action that ends the process, opened before goshim's handler
    // was installed, ends it when an instance is queued in the kernel
    // (most likely what killed review_sq27's leak.c by SIGRTMIN+1, after
    // SIG_IGN and back to SIG_DFL, in about 1 run in 40 once its drains
    // emptied what goshim held, so that sysmon no longer kept it blocked,
    // sysmon_hold; not seen in 100 runs since).
    for (uint64_t s = set & ~internal_mask(); s; s &= s - 1) ensure_wrapped(__builtin_ctzll(s) + 1, true);
    waited_mask.fetch_or(set);
  }
  uint64_t old = gp->sigwaiting.exchange(set, std::memory_order_seq_cst);
  if (set != old) bump_masks();
}


// On gp, at its exit (after its destructors). As the kernel does with a
// process-directed signal pending when the thread it picked exits, the
// process signals routed to gp and not delivered yet go back to the
// process (their instances are still in held[]), for sysmon to route to
// another G; gp itself is no longer a candidate.
//
// Before that, as the kernel does for a thread that leaves a signal open
// (glibc blocks them all only after the key destructors): a process signal
// sent before this point is delivered here, wherever goshim has it: still
// in the kernel's queue, on its way into goshim on another thread
// (deferring), held for the process or routed to gp. Giving it back
// instead lost it when gp was the only G that left it open (the program
// waited forever for its handler; Open POSIX pthread_cond_timedwait/4-3).
void signal_g_exit(G* gp) {
  // A SIGPIPE or SIGXFSZ raised for one of gp's writes that goshim did not
  // see (stdio's, glibc's own write) and still pending on its M goes with
  // gp (pool_drop below), not to the next G the M runs.
  signal_claim_raised(gp, kSigRaisedByCall, Raised::Exit);
  // From here on gp counts as blocking everything.
  nexiting.fetch_add(1, std::memory_order_seq_cst);
  account_mask_change(gp->sigmask, 0);
  uint64_t open = ~gp->sigmask & (handled_mask.load(std::memory_order_acquire) |
                                  wrapped_bits.load(std::memory_order_acquire)) &
                  ~internal_mask();
  // Only where gp is the last G that leaves a signal open is there no one
  // else to take it (another G takes it through sysmon, as natively any
  // thread that leaves it open may).
  uint64_t last = 0;
  if (open && gp->m && !gp->insig) {
    int64_t others = sched.ngoroutines.load(std::memory_order_seq_cst) -
                     nexiting.load(std::memory_order_seq_cst);
    // No signal can have every other G blocking it when fewer Gs block
    // anything (the loop would read each nblock[sig] <= nmasked).
    if (others <= nmasked.load(std::memory_order_seq_cst)) {
      for (uint64_t s = open; s; s &= s - 1) {
        int sig = __builtin_ctzll(s) + 1;
        if (others - nblock[sig].load(std::memory_order_seq_cst) <= 0) last |= bit(sig);
      }
    }
  }
  if (last) {
    open = last;
    // sysmon routes nothing more to gp (what it holds, gp takes below).
    sc_store(gp->sig_exiting, true);
    // The kernel mask changed and back: the kernel re-evaluates this
    // thread's pending state (recalc_sigpending) and delivers a process
    // signal still queued for another thread to this one on return.
    M* mp = gp->m;
    uint64_t k = with_fwd(mp, kmask(gp->sigmask)), t = k | bit(kSigCancel);
    sys::rt_sigprocmask(SIG_SETMASK, &t, nullptr, 8);
    sys::rt_sigprocmask(SIG_SETMASK, &k, nullptr, 8);
    __atomic_store_n(&mp->cur_sigmask, k, __ATOMIC_RELEASE);
    // sysmon's next look (signal_route) comes after the handlers of what
    // it took from the kernel before the change above (it may have been
    // preempted between the kernel's dequeue and its handler), and after
    // the routing pass under way, which may have chosen gp (taken the
    // process bit, not yet claimed it for gp). Idle Ms block these signals
    // (signal_m_sleep); other Ms may hold one taken on a stale mask, from
    // the kernel's dequeue (wait_stale_ms) until their handler ends
    // (deferring).
    uint64_t req = sysmon_barrier_req.fetch_add(1, std::memory_order_seq_cst) + 1;
    sysmon_wake();
    for (int i = 0; sysmon_barrier_ack.load(std::memory_order_seq_cst) < req && i < 1000000; i++)
      spin_yield();
    wait_stale_ms(mp, open);
    for (int i = 0; deferring.load(std::memory_order_seq_cst) != 0 && i < 100000; i++) spin_yield();
    // A forward sysmon sent to this M for gp: let it arrive while gp still
    // runs here with the signal open (it runs the routed instance), rather
    // than later on whatever this M runs next.
    for (uint64_t s = open; s; s &= s - 1) {
      int sig = __builtin_ctzll(s) + 1;
      for (int i = 0; i < 100000; i++) {
        uintptr_t f = (uintptr_t)mp->sigfwd[sig].load(std::memory_order_acquire);
        if ((G*)(f & ~(uintptr_t)1) != gp) break;
        spin_yield();
      }
    }
    uint64_t take = proc_pending.load(std::memory_order_acquire) & open;
    if (take) {
      uint64_t got = proc_pending.fetch_and(~take, std::memory_order_acq_rel) & take;
      gp->sigpending_proc.fetch_or(got, std::memory_order_acq_rel);
      gp->sigpending.fetch_or(got, std::memory_order_acq_rel);
    }
    if (signal_has_pending(gp)) signal_deliver(gp);
  }
  // Dekker with signal_route: it sets sigpending_proc, then reads sigmask.
  sc_store(&gp->sigmask, ~0ull);
  // No more instances for gp: senders that queue one after this look
  // again and drop it (exited_after_push).
  sc_store(gp->sig_exiting, true);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint64_t left = gp->sigpending_proc.exchange(0, std::memory_order_seq_cst);
  pool_drop(gp);  // its thread-directed signals go with it
  if (!left) return;
  gp->sigpending.fetch_and(~left, std::memory_order_acq_rel);
  proc_pending.fetch_or(left, std::memory_order_acq_rel);
  sysmon_wake();
}

void signal_g_start(G* gp) { account_mask_change(0, gp->sigmask); }

int signal_ksuspend(G* gp, const sigset_t* mask, int (*real_suspend)(const sigset_t*)) {
  uint64_t open = ~to_bits(mask) & ~internal_mask();
  sc_store(gp->ksuspend_open, open);
  // Sent before the store (signal_send kept it on gp): forwarded to this
  // thread now, where the kernel holds it until the sigsuspend opens it.
  uint64_t due = gp->sigpending.load(std::memory_order_seq_cst) & open;
  while (due) {
    int sig = __builtin_ctzll(due) + 1;
    due &= due - 1;
    reach_running(gp, sig);
  }
  int r = real_suspend(mask);
  int e = errno;
  sc_store(gp->ksuspend_open, (uint64_t)0);
  errno = e;
  return r;
}

void signal_parked(G* gp) {
  // A handler on this thread may have made a signal pending on gp before
  // the status store (a forward taken inside the switch, "mid", left for
  // gp's resumption): program order on this thread orders it before the
  // look below; a signal fence keeps the compiler from reordering them.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (gp->wait_kind.load(std::memory_order_relaxed) == WaitKind::None) return;
  if (!(gp->sigpending.load(std::memory_order_relaxed) & ~__atomic_load_n(&gp->sigmask, __ATOMIC_RELAXED)))
    return;
  g_unrouted.store(true, std::memory_order_release);
  sysmon_wake();
}

void signal_g_gone() { nexiting.fetch_sub(1, std::memory_order_seq_cst); }

void signal_after_fork(G* gp, M* mp) {
  for (auto& n : nblock) n.store(0, std::memory_order_relaxed);
  if (mp) {
    // The parent's Gs are gone; the caller's pending instances came along.
    mp->raised_owner = gp;
    mp->raised_goid = gp ? gp->goid : 0;
  }
  nmasked.store(0, std::memory_order_relaxed);
  nexiting.store(0, std::memory_order_relaxed);
  if (gp) account_mask_change(0, gp->sigmask);
  proc_pending.store(0, std::memory_order_relaxed);
  sysmon_hold.store(0, std::memory_order_relaxed);
  sysmon_open.store(0, std::memory_order_relaxed);
  sysmon_closed_by_ms.store(0, std::memory_order_relaxed);
  sysmon_leaves.store(0, std::memory_order_relaxed);
  sysmon_leaves_gen.store(0, std::memory_order_relaxed);
  for (auto& t : std_taking) t.store(0, std::memory_order_relaxed);
  for (auto& q : held_std) q.reset();
  held_std_n.store(0, std::memory_order_relaxed);
  pool_reset();
  sigq_seq.store(0, std::memory_order_relaxed);  // a write the fork cut short
  sigq_at.store(0, std::memory_order_relaxed);
  g_unrouted.store(false, std::memory_order_relaxed);
  if (gp) {
    gp->sigpending.store(0, std::memory_order_relaxed);
    gp->sigpending_proc.store(0, std::memory_order_relaxed);
    gp->intr_signal.store(0, std::memory_order_relaxed);
  }
  if (mp) {
    for (auto& f : mp->sigfwd) f.store(nullptr, std::memory_order_relaxed);
    mp->open_soon.store(0, std::memory_order_relaxed);
  }
  mask_gen.fetch_add(1, std::memory_order_relaxed);  // the new sysmon's mask
}

void SigRoute::consider(G* g) {
  if (g->magic != kGMagic) return;
  GStatus st = g->status.load(std::memory_order_acquire);
  if (st == GStatus::Idle || st == GStatus::Dead) return;
  if (g->sig_exiting.load(std::memory_order_seq_cst)) return;  // it takes what is held itself
  if (g->sigwaiting.load(std::memory_order_relaxed) & b) {
    if (!waiter) waiter = g;
    return;
  }
  if (g->sigmask & b) return;
  if (!leader && leader_state_takes(g, sig)) leader = g;
  if (st == GStatus::Running || st == GStatus::Syscall) {
    if (!running) running = g;
  } else if (!parked || (st == GStatus::Waiting && g->wait_kind.load() != WaitKind::None)) {
    parked = g;
  }
}

SigRoute::Kind SigRoute::kind() const {
  G* target = this->target();
  if (!target) return Pending;  // blocked everywhere: it waits for a G to unblock it
  if (!waiter && ignored_now(sig)) {
    // Ignored and some G leaves it open: discarded, as the kernel would
    // (it is wrapped only for a waiter, ensure_wrapped); never a reason
    // to interrupt a G.
    return Discard;
  }
  if (!waiter && terminates_by_default(sig)) {
    // Its default action ends the process whichever thread takes it: do
    // it here. Routed to a G, it waited for that G to run, which a G
    // parked on a lock, or runnable while no M runs it, may never do.
    return Die;
  }
  if (waiter) return Waiter;
  if (target == running) {
    // A forward of sig still in flight to that M: the next instance waits
    // for sysmon's next look. (Overwriting sigfwd made the handler take
    // the second tgkill for the program's own, and run it with SI_TKILL,
    // the original siginfo lost.)
    M* tm = target->m;
    if (tm && tm->sigfwd[sig].load(std::memory_order_acquire) != nullptr) return Later;
    return Running;
  }
  return Parked;
}

uint64_t signal_sysmon_mask(uint64_t waited, uint64_t blocked_all) {
  uint64_t wrapped = (wrapped_bits.load(std::memory_order_relaxed) | fatal_now()) & ~blocked_all;
  uint64_t open = (handled_mask.load() | waited | wrapped) & ~internal_mask();
  return ~open & ~bit(kSigSetxid);
}

bool signal_route_pending() {
  return proc_pending.load(std::memory_order_relaxed) != 0 || g_unrouted.load(std::memory_order_relaxed);
}

// Locks: none held; takes sema/scheduler locks through interrupt_wait.
void signal_route() {
  // Every handler of a signal sysmon took from the kernel before this
  // point has run (a handler runs before the code it interrupts resumes).
  sc_store(sysmon_barrier_ack, sysmon_barrier_req.load(std::memory_order_seq_cst));
  // sysmon's own mask: receive what some G handles or waits for, except
  // the signals it holds an instance of (sysmon_hold).
  static uint64_t seen_gen = ~0ull;
  static uint64_t base = ~0ull;     // computed from the Gs below
  static uint64_t applied = ~0ull;  // sysmon's kernel mask
  // Its handlers blocked what they held (hold_block), from their return.
  applied |= sysmon_hold.load(std::memory_order_seq_cst);
  bool force = false;
  uint64_t gen = mask_gen.load(std::memory_order_acquire);
  if (gen != seen_gen) {
    seen_gen = gen;
    uint64_t waited = 0, blocked_all = main_g()->sigmask;
    // Recompute the waited set from the Gs that still wait, and the
    // signals every live G blocks.
    size_t n = arena_nslots();
    for (size_t i = 0; i < n; i++) {
      G* g = arena_slot_g(i);
      if (g->magic != kGMagic) continue;
      waited |= g->sigwaiting.load(std::memory_order_relaxed);
      GStatus st = g->status.load(std::memory_order_relaxed);
      if (st != GStatus::Idle && st != GStatus::Dead) blocked_all &= g->sigmask;
    }
    waited |= main_g()->sigwaiting.load(std::memory_order_relaxed);
    sc_store(waited_mask, waited);
    // Also the signals left at their default action that goshim wraps
    // because some G blocks them, if some G leaves them open: when the only
    // such Gs are parked and every running M blocks it, sysmon must receive
    // it and route it (its default action then runs on that G, as
    // natively), instead of leaving it pending in the kernel where no
    // thread takes it. One that every G blocks stays in the kernel, where
    // the program's signalfd or a later unblocking finds it.
    // Likewise a signal whose default action ends the process and that
    // goshim does not wrap (no G blocks it, or it would be wrapped):
    // natively any thread would take it, so sysmon does, and the kernel
    // ends the process. Otherwise, with every M idle in stopm on a kernel
    // mask that blocks it (an M's mask is the last G's, or its creator's),
    // a SIGTERM stayed pending forever. (Not signals ignored by default: a
    // G may block one without goshim wrapping it or recomputing this mask,
    // and sysmon would then take it from the G's sigwaitinfo.)
    base = signal_sysmon_mask(waited, blocked_all);
    force = true;
  }
  // An instance sysmon held was taken (and the merge of a standard one's
  // kernel instance is over: held_empty first, then std_taking, as the
  // taker counts itself before it takes): sysmon takes the next one.
  for (uint64_t h = sysmon_hold.load(std::memory_order_seq_cst); h; h &= h - 1) {
    int sig = __builtin_ctzll(h) + 1;
    if (!held_empty(sig)) continue;
    if (sig < kSigRtMin && std_taking[sig].load(std::memory_order_seq_cst) != 0) continue;
    sysmon_hold.fetch_and(~bit(sig), std::memory_order_seq_cst);
  }
  // A signal some M's kernel mask leaves open (or is about to, open_soon)
  // is taken there: sysmon leaves it to that M, one taker (not one a G
  // waits for: signal_route hands that to the waiter).
  uint64_t leavable = (handled_mask.load(std::memory_order_relaxed) | wrapped_bits.load(std::memory_order_relaxed)) &
                      ~waited_mask.load(std::memory_order_relaxed) & ~internal_mask();
  // Dekker with sysmon_close_wait, which publishes open_soon and then
  // reads sysmon_open and sysmon_leaves: what sysmon may open is published
  // before it reads the Ms' masks. Either this look sees that M's
  // open_soon, or that M sees the signal as one sysmon takes and waits
  // until sysmon has closed it. (Read first and published after, an M
  // that began to open the signals between the two found sysmon_leaves
  // stale, did not wait, and took them from the kernel beside sysmon: two
  // takers at once, SIGRTMIN+1's 101 run after 103 and 105,
  // tests/preload/signals_queue_rounds.)
  {
    uint64_t may = ~(base | sysmon_hold.load(std::memory_order_seq_cst));
    uint64_t o = sysmon_open.load(std::memory_order_relaxed);
    if (may & ~o) sc_store(sysmon_open, o | may);
    uint64_t l = sysmon_leaves.load(std::memory_order_relaxed);
    if (may & leavable & ~l) sc_store(sysmon_leaves, l | (may & leavable));
  }
  uint64_t mopen = 0;
  for (M* m = __atomic_load_n(&sched.allm, __ATOMIC_ACQUIRE); m; m = m->alllink)
    mopen |= ~__atomic_load_n(&m->cur_sigmask, __ATOMIC_ACQUIRE) | m->open_soon.load(std::memory_order_seq_cst);
  uint64_t by_ms = mopen & leavable;
  sysmon_closed_by_ms.store(by_ms, std::memory_order_relaxed);
  uint64_t want = base | sysmon_hold.load(std::memory_order_seq_cst) | by_ms;
  if (force || want != applied) {
    // Published before it opens anything (sysmon_sync reads it).
    sc_store(sysmon_open, ~(want & applied));
    sys::rt_sigprocmask(SIG_SETMASK, &want, nullptr, 8);
    applied = want;
  }
  // What it has open, once its handlers of what it took while opening
  // have run (on the way back from rt_sigprocmask).
  if (sysmon_open.load(std::memory_order_relaxed) != ~want) sc_store(sysmon_open, ~want);
  sysmon_leaves.store(~want & leavable, std::memory_order_relaxed);
  sc_store(sysmon_leaves_gen, gen);
  // Gs that got a signal while not running: wake the parked ones.
  if (g_unrouted.exchange(false, std::memory_order_acq_rel)) {
    auto wake = [](G* g) {
      if (g->magic != kGMagic) return;
      GStatus st = g->status.load();
      if (st == GStatus::Idle || st == GStatus::Dead) return;
      // In sigwait/sigsuspend for it: parked or about to park (a signal
      // handler that made it pending could not end the wait itself).
      uint64_t waited = g->sigpending.load(std::memory_order_seq_cst) &
                        g->sigwaiting.load(std::memory_order_seq_cst);
      if (waited) {
        signal_note_interrupt(g, __builtin_ctzll(waited) + 1);
        signal_wake_waiter(g);
        return;
      }
      if (st != GStatus::Waiting) return;
      uint64_t due = g->sigpending.load() & ~g->sigmask;
      if (!due) return;
      signal_note_interrupt(g, __builtin_ctzll(due) + 1);
      interrupt_wait(g);
    };
    wake(main_g());
    size_t n = arena_nslots();
    for (size_t i = 0; i < n; i++) wake(arena_slot_g(i));
  }
  uint64_t pend = proc_pending.load(std::memory_order_acquire);
  while (pend) {
    int sig = __builtin_ctzll(pend) + 1;
    uint64_t b = bit(sig);
    pend &= ~b;
    SigRoute r(sig);
    r.consider(main_g());
    size_t n = arena_nslots();
    for (size_t i = 0; i < n && !r.done(); i++) r.consider(arena_slot_g(i));
    SigRoute::Kind kind = r.kind();
    if (kind == SigRoute::Pending || kind == SigRoute::Later) continue;
    if (kind == SigRoute::Discard) {
      if (proc_pending.fetch_and(~b, std::memory_order_acq_rel) & b) {
        siginfo_t drop;
        while (held_pop(sig, &drop)) {
        }
      }
      continue;
    }
    if (kind == SigRoute::Die) {
      die_default(sig);
      continue;
    }
    G* target = r.target();
    G* waiter = r.waiter;
    G* running = r.running;
    if (!target) continue;  // (kind() answers Pending then: not reached)
    if (!(proc_pending.fetch_and(~b, std::memory_order_acq_rel) & b)) continue;
    target->sigpending_proc.fetch_or(b, std::memory_order_seq_cst);
    if (target != waiter && (__atomic_load_n(&target->sigmask, __ATOMIC_SEQ_CST) & b)) {
      // target began to exit (signal_g_exit) since it was chosen: the
      // claim goes back to the process unless the exit already took it.
      if (target->sigpending_proc.fetch_and(~b, std::memory_order_acq_rel) & b) {
        proc_pending.fetch_or(b, std::memory_order_acq_rel);
        g_unrouted.store(true, std::memory_order_release);
      }
      continue;
    }
    if (target == running && !waiter && send_to_running(target, sig, nullptr, true)) continue;
    target->sigpending.fetch_or(b, std::memory_order_seq_cst);
    if (target == waiter && !(target->sigwaiting.load(std::memory_order_seq_cst) & b) &&
        (__atomic_load_n(&target->sigmask, __ATOMIC_SEQ_CST) & b)) {
      // The waiter's wait ended since it was chosen (Dekker with
      // signal_wait_done, which gives back what it finds claimed after
      // withdrawing its set): the claim goes back to the process, unless
      // the waiter took it or gave it back first.
      give_back_claim(target, sig);
      continue;
    }
    if (target == waiter) {
      // Whether it is parked yet or not: it may be between publishing its
      // set and parking (preempted there, or its thread descheduled), and
      // then an interrupt finds no wait and it sleeps with the signal.
      signal_note_interrupt(target, sig);
      signal_wake_waiter(target);
    } else if (target->status.load() == GStatus::Waiting) {
      signal_note_interrupt(target, sig);
      interrupt_wait(target);
    }
  }
}

namespace {
// Whether no program handler without SA_RESTART ran since the count was
// handled0, given the count after the last one that did (0: none yet).
bool none_norestart_since(uint32_t last_norestart, uint32_t handled0) {
  return (int32_t)(last_norestart - handled0) <= 0;
}
}  // namespace

void signal_die_default(int sig) { die_default(sig); }

uint32_t signal_thread_handled() {
  G* gp = tls_g;
  if (gp && !gp->is_g0()) return gp->nhandled;
  return kt_nhandled;
}

bool signal_thread_restart_since(uint32_t handled0) {
  G* gp = tls_g;
  if (gp && !gp->is_g0()) return none_norestart_since(gp->last_norestart, handled0);
  return none_norestart_since(kt_last_norestart, handled0);
}

void signal_note_interrupt(G* gp, int sig) { gp->intr_signal.store(sig, std::memory_order_release); }

bool signal_interrupt_lost(G* gp, uint32_t handled0) {
  if (gp->nhandled != handled0 || gp->intr_signal.load(std::memory_order_acquire) == 0) return false;
  uint64_t left = (gp->sigpending.load(std::memory_order_seq_cst) |
                   gp->sigpending_proc.load(std::memory_order_seq_cst)) &
                  ~__atomic_load_n(&gp->sigmask, __ATOMIC_ACQUIRE) & ~internal_mask();
  if (left) {
    // Still to deliver here (a delivery put off): the wait's end is decided
    // by the first of them, as the kernel's restart is by the handler it
    // runs on the way out (lowest number first), not by the lost one.
    gp->intr_signal.store(__builtin_ctzll(left) + 1, std::memory_order_release);
    return false;
  }
  gp->intr_signal.store(0, std::memory_order_release);
  return true;
}

bool signal_restart_since(G* gp, uint32_t handled0) {
  int sig = gp->intr_signal.exchange(0, std::memory_order_acq_rel);
  if (gp->nhandled != handled0) return none_norestart_since(gp->last_norestart, handled0);
  return sig > 0 && (signal_flags(sig) & SA_RESTART);
}

int signal_altstack(G* gp, const stack_t* ss, stack_t* old) {
  uintptr_t sp = arch::get_sp();
  bool on = !(gp->altstack.ss_flags & SS_DISABLE) && sp >= (uintptr_t)gp->altstack.ss_sp &&
            sp < (uintptr_t)gp->altstack.ss_sp + gp->altstack.ss_size;
  if (old) {
    *old = gp->altstack;
    if (on) old->ss_flags |= SS_ONSTACK;
    if (old->ss_flags & SS_DISABLE) old->ss_flags = SS_DISABLE;
  }
  if (!ss) return 0;
  if (on) return EPERM;
  // As the kernel: the mode is 0, SS_ONSTACK (old sigstack callers pass
  // it; it means 0) or SS_DISABLE, plus SS_AUTODISARM.
  int mode = ss->ss_flags & ~(int)SS_AUTODISARM;
  if (mode != 0 && mode != SS_ONSTACK && mode != SS_DISABLE) return EINVAL;
  // MINSIGSTKSZ is sysconf(_SC_MINSIGSTKSZ), a long, on glibc 2.34 and later.
  if (!(ss->ss_flags & SS_DISABLE) && ss->ss_size < (size_t)MINSIGSTKSZ) return ENOMEM;
  gp->altstack = *ss;
  gp->altstack.ss_flags = ss->ss_flags & (int)SS_AUTODISARM;
  if (ss->ss_flags & SS_DISABLE) gp->altstack = stack_t{nullptr, SS_DISABLE, 0};
  if (gp->m) signal_apply(gp->m, gp);
  return 0;
}

// ---- cancellation ----------------------------------------------------------------

namespace {
constexpr int kCancelDisabled = 1 << 0;
constexpr int kCancelAsync = 1 << 1;
constexpr int kCanceling = 1 << 2;
constexpr int kCanceled = 1 << 3;
constexpr int kExiting = 1 << 4;

int* cancelhandling(G* gp) { return (int*)(gp->tp + tls::L.cancelhandling); }
}  // namespace

bool cancel_pending(G* gp) {
  int ch = __atomic_load_n(cancelhandling(gp), __ATOMIC_ACQUIRE);
  return (ch & (kCancelDisabled | kCanceled | kExiting)) == kCanceled;
}

bool cancel_async_type(G* gp) {
  return __atomic_load_n(cancelhandling(gp), __ATOMIC_RELAXED) & kCancelAsync;
}

bool cancel_async_pending(G* gp) {
  int ch = __atomic_load_n(cancelhandling(gp), __ATOMIC_ACQUIRE);
  return (ch & (kCancelDisabled | kCanceled | kExiting | kCancelAsync)) == (kCanceled | kCancelAsync) &&
         !gp->cancel_unsignalled.load(std::memory_order_acquire);
}

bool cancel_async_suspend(G* gp) {
  if (cancel_proto() == CancelProto::Bridge || !(__atomic_load_n(cancelhandling(gp), __ATOMIC_RELAXED) & kCancelAsync))
    return false;
  sc_store(gp->guarded_async, true);
  __atomic_fetch_and(cancelhandling(gp), ~kCancelAsync, __ATOMIC_SEQ_CST);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  return true;
}

void cancel_async_restore(G* gp) {
  __atomic_fetch_or(cancelhandling(gp), kCancelAsync, __ATOMIC_SEQ_CST);
  sc_store(gp->guarded_async, false);
}

void cancel_point() {
  G* gp = tls_g;
  if (!gp || gp->is_g0() || !cancel_pending(gp)) return;
  // glibc's unwinding runs none of goshim's destructors: nothing of the
  // runtime may be held here (async_cancel_safe).
  GOSHIM_NO_LOCKS("cancel_point");
  gp->retval = PTHREAD_CANCELED;
  // When called from a signal handler, the unwinding never returns through
  // rt_sigreturn: put back the kernel mask the G runs with.
  if (M* mp = gp->m) {
    uint64_t k = with_fwd(mp, kmask(gp->sigmask));
    sys::rt_sigprocmask(SIG_SETMASK, &k, nullptr, 8);
    __atomic_store_n(&mp->cur_sigmask, k, __ATOMIC_RELEASE);
  }
  real::pthread_testcancel();  // glibc unwinds: cleanup handlers, destructors
}

void cancel_point_any() {
  G* gp = tls_g;
  if (gp) {
    if (!gp->is_g0()) cancel_point();
    return;
  }
  // A kernel thread (or code before init): glibc's own record.
  if (auto tc = real::lazy::pthread_testcancel()) tc();
}

CancelOff::CancelOff(bool deferred_only) {
  if (__builtin_expect(!tls::L.cancelhandling, 0)) {
    // The TCB's layout is not known (before init, or a glibc goshim runs
    // 1:1 only): glibc's own call, which is no cancellation point. For an
    // asynchronous type too (deferred_only): a cancellation held off here
    // acts when the state is restored, as it may anywhere.
    int old = PTHREAD_CANCEL_DISABLE;
    if (pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old) == 0 && old == PTHREAD_CANCEL_ENABLE)
      glibc_state = true;
    return;
  }
  int* w = (int*)(arch::get_tp() + tls::L.cancelhandling);
  if (deferred_only && (__atomic_load_n(w, __ATOMIC_RELAXED) & kCancelAsync)) return;
  if (!(__atomic_fetch_or(w, kCancelDisabled, __ATOMIC_ACQ_REL) & kCancelDisabled)) ch = w;
}

namespace {

// Whether goroutines parked for reason r are, natively, inside one of
// glibc's cancellable calls (which glibc up to 2.40 runs in asynchronous
// mode): the cancellation points among goshim's waits (LD_PRELOAD.md 4.21).
bool wait_is_cancellation_point(WaitReason r) {
  switch (r) {
    case WaitReason::Join:
    case WaitReason::Sleep:
    case WaitReason::Cond:
    case WaitReason::Semaphore:
    case WaitReason::IORead:
    case WaitReason::IOWrite:
    case WaitReason::Poll:
    case WaitReason::Select:
    case WaitReason::EpollWait:
    case WaitReason::Accept:
    case WaitReason::Connect:
    case WaitReason::SigWait:
      return true;
    default:
      return false;
  }
}

// Whether glibc's pthread_cancel sends SIGCANCEL to another thread whose
// cancellation is enabled (old, its cancelhandling) and that is where
// target is (st): from 2.41 always; up to 2.40 only to a thread in
// asynchronous mode, the program's or that of a cancellable call glibc
// makes (for a goroutine: in a blocking call, the TCB's bit, as glibc's
// wrapper sets it there; parked in a goshim wait that is a cancellation
// point, or in goshim's own cancellable kernel wait, natively inside such
// a call; of the asynchronous type, suspended in a guarded blocking call).
bool glibc_signals(const G* target, int old, GStatus st) {
  if (cancel_proto() == CancelProto::Bridge || (old & kCancelAsync) ||
      target->guarded_async.load(std::memory_order_acquire))
    return true;
  if (st == GStatus::Syscall) return target->kwait_cancellable;
  if (st == GStatus::Waiting) return wait_is_cancellation_point(target->waitreason);
  return false;
}

// Whether the kernel queues one more SIGCANCEL for this process now (the
// user's pending signals against RLIMIT_SIGPENDING): 0 or -EAGAIN, as
// glibc's tgkill would find it. goshim does not need the signal where it
// wakes or kicks the goroutine itself, so the one sent to find out goes to
// the calling thread, as SI_QUEUE, which sigcancel_handler ignores.
long sigcancel_room() {
  // The instances goshim holds count too (sigpending_room_for); the
  // kernel's check of the probe counts the rest.
  if ((pool_used.load(std::memory_order_acquire) | held_std_n.load(std::memory_order_acquire)) &&
      !sigpending_room_for(1))
    return -EAGAIN;
  union sigval none = {};
  return signal_send_queued((pid_t)sys::gettid(), kSigCancel, none);
}

// Up to glibc 2.40: a target pthread_cancel signals is marked CANCELING
// only until the kernel has queued the signal (glibc's handler marks it
// CANCELED; goshim marks it once the queue has room, before it acts).
void mark_canceled(int* ch) {
  int old = __atomic_load_n(ch, __ATOMIC_RELAXED);
  while (!(old & (kCanceled | kExiting)) &&
         !__atomic_compare_exchange_n(ch, &old, old | kCanceled, true, __ATOMIC_ACQ_REL,
                                      __ATOMIC_RELAXED)) {
  }
}

// pthread_cancel's SIGCANCEL could not be queued: EAGAIN, as glibc. Up to
// 2.40 nothing is pending then (CANCELING only); from 2.41 (marked) the
// target goes on and acts at its next cancellation point.
int unsignalled(G* target, bool marked) {
  if (marked) target->cancel_unsignalled.store(true, std::memory_order_release);
  return EAGAIN;
}

}  // namespace

// glibc's contract (nptl/pthread_cancel.c, 2.36 and 2.41): the error of the
// SIGCANCEL it sends (EAGAIN when the user's queue is full) is the result.
// Up to 2.40 only a target in asynchronous mode is signalled, marked
// CANCELING, and CANCELED by the signal's handler: a signal that cannot be
// queued leaves nothing pending (a later pthread_cancel signals again).
// From 2.41 every target with cancellation enabled is signalled and marked
// CANCELED first: one that cannot be queued leaves the cancellation
// pending, acted on at the target's next cancellation point (its blocking
// call is not interrupted), and a later pthread_cancel sends nothing.
// goshim follows both; it needs the kernel signal only for a goroutine in
// the kernel (a blocking call, a program handler's libc call) and wakes or
// kicks the others itself, after the same check of the queue. Known
// difference: up to 2.40 a goroutine parked in sendfile's wait (no
// cancellation point, WaitReason IOWrite) counts as signalled.
int cancel_send(G* target) {
  dump_unwinder_init();  // the target's handler may unwind (dump_program_frame_first)
  int* ch = cancelhandling(target);
  G* self = tls_g;
  bool bridge = cancel_proto() == CancelProto::Bridge;
  int old = __atomic_load_n(ch, __ATOMIC_RELAXED);
  bool signals;
  int nv;
  // Before the bits: a zombie's block was reset at its exit, and the next
  // create on this G clears what a cancel set after that (tls::block_init).
  target->cancel_marked.store(true, std::memory_order_relaxed);
  do {
    if ((old | kCanceling | kCanceled) == old) return 0;
    GStatus st = target->status.load(std::memory_order_acquire);
    signals = target != self && !(old & (kCancelDisabled | kExiting)) && glibc_signals(target, old, st);
    nv = old | kCanceling | (signals && !bridge ? 0 : kCanceled);
  } while (!__atomic_compare_exchange_n(ch, &old, nv, true, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
  if (old & (kCancelDisabled | kExiting)) return 0;  // acted upon when enabled
  if (target == self) {
    if (old & kCancelAsync) cancel_point();
    return 0;
  }
  if (signals) {
    if (sigcancel_room() == -EAGAIN) return unsignalled(target, bridge);
    if (!bridge) mark_canceled(ch);
  }
  // (Paired with run_program's fence: a G entering a program handler sees
  // the cancellation in its cancellable libc call, or is seen here; and
  // with blocking_guarded's and gwait_commit's.)
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  GStatus st = target->status.load(std::memory_order_acquire);
  M* mp = target->m;
  // In a blocking call: if it is one of glibc's cancellation points, glibc
  // made it asynchronous around the system call (or, 2.41, acts on a pc in
  // its bridge). In a program signal handler: its calls go to libc's own
  // (neither the fd layer nor the shim parks there), so it may sleep in one
  // of glibc's cancellable system calls; glibc's protocol acts on SIGCANCEL
  // there (sigcancel_handler), as natively. A G in a handler does not move
  // to another M; the signal is harmless where it finds none.
  bool in_kernel = mp && (st == GStatus::Syscall ||
                          (st == GStatus::Running && __atomic_load_n(&target->insig, __ATOMIC_RELAXED) > 0));
  if (in_kernel) {
    // The queue filled since sigcancel_room: the cancellation is marked,
    // acted on at the next cancellation point.
    if (sys::tgkill(sys::getpid(), mp->tid, kSigCancel) == -EAGAIN && signals)
      return unsignalled(target, true);
    return 0;
  }
  if (st == GStatus::Running && (old & kCancelAsync) && mp) {
    preempt_kick(target, true);  // asynchronous cancellation where it runs
  } else if (st == GStatus::Waiting) {
    interrupt_wait(target);  // goshim's waits are cancellation points
  } else if (old & kCancelAsync) {
    // Runnable (queued, between Ms): it acts at its next interposed call
    // from the program's code (preempt_at_call), or where sysmon's
    // preemption finds it computing.
    target->preempt.store(true, std::memory_order_release);
  }
  return 0;
}

}  // namespace goshim
