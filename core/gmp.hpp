// G, M, P and the global scheduler state. Types and state enums only; the
// code lives in sched.cpp (scheduling), proc.cpp (creating and ending Gs
// and Ms), park.cpp (park/ready), runq.cpp (run queues).
//
// Vocabulary for contracts (see HACKING.md):
//   On g0        runs on the M's scheduler stack with the M's TLS
//   On user G    runs on a goroutine's stack with the goroutine's TLS
//   Without P    the M holds no P (cannot touch run queues or timers of its own)
//   Owner P only only the M holding that P may call it
//   Any P        callable by any M holding some P
//   Signal-safe  no locks, no malloc, errno preserved
#pragma once

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <atomic>

#include "core/lock.hpp"
#include "core/numparse.hpp"
#include "core/timer.hpp"

namespace goshim {

struct G;
struct M;
struct P;
struct PiWaiter;

// ---------------------------------------------------------------------------
// G states. Each says who owns the G's stack, whether the G sits on a run
// queue and whether it holds an M.
enum class GStatus : uint32_t {
  // Allocated but not in use: on a free list or being initialized.
  // No stack is attached (or it is being attached). Not on a run queue.
  Idle = 0,
  // Ready to run: on exactly one run queue (runnext, a local ring, the
  // global queue) or in a ready batch being moved between them. Its stack
  // is not in use; no M.
  Runnable = 1,
  // Executing on an M that holds a P. The stack is owned by the G.
  Running = 2,
  // In a blocking call (enter_blocking .. exit_blocking). Owns its stack
  // and its M; the M's P may be retaken by sysmon.
  Syscall = 3,
  // Parked: on no run queue. The record of what it waits for (a sema
  // queue, a poll descriptor, a timer) is the only way back; whoever
  // removes it from there readies it.
  Waiting = 4,
  // Finished. Joinable Gs stay Dead (a zombie) until joined; then, like
  // detached ones, they go to a free list as Idle.
  Dead = 5,
};

enum class PStatus : uint32_t {
  Idle = 0,     // on sched.pidle; no M; run queue empty
  Running = 1,  // owned by an M running user code or the scheduler
  Syscall = 2,  // its M is in a blocking call; sysmon may retake it
};

// Why a G is parked. Never reuse a value; names[] below is the table the
// dumps and the trace print.
enum class WaitReason : uint8_t {
  None = 0,
  Join,
  Once,
  Sleep,
  Mutex,
  Cond,
  RWLock,
  Barrier,
  Semaphore,
  Futex,
  IORead,
  IOWrite,
  Poll,
  Select,
  EpollWait,
  Accept,
  Connect,
  SigWait,
  Preempted,
  Yield,
  Blocking,
  AtomicWait,
  Count
};
const char* wait_reason_name(WaitReason r);

// Which interruptible wait a parked G is in, so that a signal can wake it
// with EINTR (interrupt_wait in park.cpp dispatches on it).
enum class WaitKind : uint8_t {
  None = 0,
  Sema,     // sema_wait: sema_interrupt
  Netpoll,  // fd readiness wait (netpoll layer)
  Sleep,    // timer-only sleep (sleep layer)
};

// Flags on G::flags (set at creation, read-only afterwards unless noted).
enum : uint32_t {
  kGFlagG0 = 1u << 0,      // an M's scheduler G
  kGFlagMain = 1u << 1,    // G1: main, running on the initial thread's TLS and stack
  kGFlagUserStack = 1u << 2,  // stack supplied by pthread_attr_setstack
};

// A goroutine stack: [lo, hi) usable; the mapping is [map_lo, map_lo+map_size)
// with a guard of guard bytes at the bottom.
struct Stack {
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  uintptr_t map_lo = 0;
  size_t map_size = 0;
  size_t guard = 0;
};

// State of a parked G's sema wait (core/sema.cpp). Lives in the G so that a
// timer or a waker can reach it after the waiting frame is gone.
struct SemaWaiter {
  const void* addr = nullptr;  // the address waited on
  SemaWaiter* next = nullptr;  // FIFO of waiters on the same address
  SemaWaiter* prev = nullptr;
  SemaWaiter* tail = nullptr;  // valid in the list head only
  SemaWaiter* nextaddr = nullptr;  // next address in the bucket (head only)
  G* gp = nullptr;                 // nullptr for a foreign (kernel) waiter
  std::atomic<uint32_t> kwake{0};  // foreign waiter: futex word, 1 = woken
  uint32_t bitset = ~0u;
  uint32_t val = 0;                 // the value the word held when it was enqueued
  std::atomic<uint32_t> queued{0};  // 1 while on a bucket list
  uint64_t seq = 0;                 // which wait of gp this is
  int result = 0;                   // 0 woken, ETIMEDOUT, EINTR
  int prio = 0;  // a real-time waiter's priority (core/rtlock.hpp): woken first, as by the kernel
  // A lock waiter that takes a hand-over (sema_release_lock): when its
  // attempt to take the lock began waiting (CLOCK_MONOTONIC ns); 0 for
  // every other waiter (a condition variable's, requeued onto a mutex
  // word, does not know the protocol and is only ever woken).
  int64_t lock_since = 0;
  // What a hand-over stores in the lock word for this waiter (0: the word
  // is left as it is): a tid-word mutex's word names its owner.
  uint32_t lock_word = 0;
};

struct PollDesc;

// One registration of a parked G on a poll descriptor's read or write
// queue (core/netpoll.cpp). A G waiting on one fd uses its embedded
// G::pw; poll/select use an array of them on the waiting G's stack. The
// queue links change only under the descriptor's lock; `linked` is cleared
// (release) as the last touch of a waker, after which the owner may reuse
// the record.
struct PollWaiter {
  PollWaiter* next = nullptr;
  PollWaiter* prev = nullptr;
  PollDesc* pd = nullptr;
  G* gp = nullptr;
  uint64_t seq = 0;                // the G's wait (G::wtoken) it belongs to
  std::atomic<uint8_t> linked{0};  // 1 while on pd's queue
  uint8_t mode = 0;                // kModeRead or kModeWrite (netpoll.hpp)
  // Direct handoff from a same-process writer (plain reads only): the
  // reader's buffer, and the bytes the writer copied into it.
  void* buf = nullptr;
  size_t len = 0;
  size_t got = 0;
};

// ---------------------------------------------------------------------------
struct G {
  // The first five lines (64 bytes each: the Gs are an array of strides
  // of sizeof(G) rounded to 64) hold what a G's create writes and its
  // first run and exit read or write (thread_create, g_entry,
  // signal_g_exit, goexit_g0, the join): a goroutine in a wave of many
  // touches 5 cold lines of its G, not 8 (bench/RESULTS.md, "create+join
  // again, helper cj15b"). Keep a new field out of them unless create
  // writes it, and sizeof(G) at most 704 (each stride is resident for
  // every thread: "Idle memory: where each byte goes").
  // Saved stack pointer of a switched-out context. Offset 0: switch.S.
  uintptr_t sched_sp = 0;
  // Thread pointer: this G's TCB. pthread_t == tls::pthread_of(tp).
  uintptr_t tp = 0;
  std::atomic<GStatus> status{GStatus::Idle};
  uint32_t flags = 0;
  M* m = nullptr;          // the M running it (Running, Syscall)
  G* schedlink = nullptr;  // run queue and free list link
  uint64_t goid = 0;       // unique, never reused
  int32_t vtid = 0;        // virtual tid stored in the TCB
  uint32_t magic = 0;      // kGMagic while the slot holds a G
  // glibc >= 2.41: pthread_cancel could not queue its SIGCANCEL (EAGAIN,
  // the user's RLIMIT_SIGPENDING): the cancellation it marked acts at the
  // G's next cancellation point only, never asynchronously (cancel_send).
  std::atomic<bool> cancel_unsignalled{false};
  // pthread_cancel has set cancellation bits in this G's TCB since its
  // create (core/signal.cpp cancel_send): the next create on this G clears
  // them if they came after the exit's block reset (a zombie canceled),
  // so that a clean block's create need not read the TCB (tls::block_init).
  std::atomic<bool> cancel_marked{false};
  int insig = 0;  // depth of program signal handlers running on this G
  Stack stack;

  // pthread
  void* (*start_routine)(void*) = nullptr;
  void* start_arg = nullptr;
  void* retval = nullptr;
  // Join protocol (proc.cpp): kJoin* bits; the word is also a sema address.
  std::atomic<uint32_t> join_state{0};
  int sched_policy = 0;
  // CPU time (core/cputime.hpp): the ns settled by closed windows (low 56
  // bits) under this run's incarnation tag (high 8 bits: a window closed
  // after the G was reused adds nothing); the largest value read (readings
  // never go back). Its window entry: cpu_win_* at the end.
  std::atomic<uint64_t> cpu_word{0};
  std::atomic<int64_t> cpu_seen{0};
  std::atomic<G*> joiner{nullptr};
  // Signals and cancellation (process semantics); more below.
  uint64_t sigmask = 0;                     // the program's blocked set for this G
  std::atomic<uint64_t> sigpending{0};      // signals sent to this G, undelivered
  std::atomic<uint64_t> sigpending_proc{0}; // of those: routed process signals (their siginfo is global)
  std::atomic<uint64_t> sigwaiting{0};      // the set it waits for (sigwait, sigsuspend)
  std::atomic<uint64_t> ksuspend_open{0};   // in a program handler, in the kernel's sigsuspend: the signals its mask opens
  stack_t altstack = {nullptr, SS_DISABLE, 0};  // sigaltstack (applied to its M)
  void* rt_start = nullptr;  // pthread_create's handshake (core/rtlock.cpp), or nullptr
  int sched_priority = 0;
  // Priority protection as glibc's tpp (core/rtlock.cpp rt_pp_change): the
  // maximum of the ceilings counted below (0: none).
  int rt_pp_max = 0;
  bool started = false;    // has run at least once
  bool started_tls = false;  // its TLS block has been initialized once
  bool block_clean = false;  // its block was brought back at exit (tls::block_clean_at_exit)
  bool block_slot_stack = false;  // ... and holds its slot's stack (set_stack) since
  bool exit_called = false;  // ended through pthread_exit (retval set)
  // Real-time scheduling (core/rtlock.hpp): bound to its M, whose kernel
  // thread has sched_policy applied; the G stays in GStatus::Syscall.
  bool rt_locked = false;
  // Bound to its M for the rest of its life because the kernel tied
  // something to its kernel thread (an io_uring ring set up
  // IORING_SETUP_SINGLE_ISSUER: rt_bind_kernel_thread). rt_locked is set
  // too; a later non-real-time policy does not unbind it.
  bool tid_bound = false;
  std::atomic<bool> rt_pending{false};  // another G gave it a real-time policy: bind at its next call
  // The priority it inherits through PTHREAD_PRIO_INHERIT mutexes it owns
  // (core/pi.hpp), 0: none; written under pi_lock, read by the scheduler.
  std::atomic<int32_t> pi_boost{0};
  std::atomic<bool> sig_exiting{false};     // exiting: sysmon routes nothing more to it
  std::atomic<bool> preempt{false};
  WaitReason waitreason = WaitReason::None;
  // A guard of its own inside its slot's stack (core/proc.cpp
  // slot_inner_guard): below a stack of this many pages at the slot's top,
  // kept while the G waits on the free lists; 0: none.
  uint32_t slot_guard_pages = 0;

  int64_t freed_at = 0;    // on the global free list since (coarse ns; proc.cpp)
  // The fifth line: also written at create.
  uint64_t creator_goid = 0;
  char name[16] = {0};     // pthread_setname_np
  // The ceilings rt_pp_max is the maximum of (up to 8 distinct ones) and
  // how often each is held.
  uint8_t rt_pp_ceil[8] = {};
  uint32_t rt_pp_count[8] = {};
  // core/pi.cpp's scratch and list of boosted Gs (under its pi_lock).
  int32_t pi_new = 0;
  uint32_t pi_epoch = 0;
  G* pi_blink = nullptr;
  // Its registered wait for a PI mutex (core/pi.hpp), dropped before an
  // asynchronous cancellation unwinds the frame that holds it.
  PiWaiter* pi_wait = nullptr;

  M* alloc_m = nullptr;    // whose jemalloc cache it is taking or using (core/mcache.hpp)

  // Parking
  const void* waitobj = nullptr;  // address or fd the G waits on (dumps)
  // Futile wake chains (sema_wait, park): the word of this G's last
  // sema wait and its value when the G resumed; the word it last woke a
  // G on since (sema_wake); and the verdict for the park under way.
  const void* sema_last_addr = nullptr;
  uint32_t sema_resume_val = 0;
  bool park_futile = false;  // (here: it fills the hole after sema_resume_val)
  const void* woke_obj = nullptr;
  // When it was last made runnable (runq_stamp() ticks; core/runq.cpp):
  // a P runs the older of its ring's head and the global queue's head.
  // Read by the owner P without a lock (the Gs are never unmapped).
  uint64_t readyat = 0;
  int64_t waitsince = 0;
  std::atomic<uint64_t> parkseq{0};  // increments on every timed park
  int park_result = 0;               // set by the waker before ready()
  std::atomic<WaitKind> wait_kind{WaitKind::None};
  bool wait_cancel_point = false;  // its gwait wait is a cancellation point (gwait_arm)
  SemaWaiter sw;
  Timer timer;

  // Preemption and blocking calls (sysmon)
  int64_t runstart = 0;
  const char* blocking_what = nullptr;  // the blocking call it is in (Syscall)
  int64_t syscall_since = 0;

  // Signals and cancellation (process semantics)
  uint32_t sigwait_word = 0;                // parks here in sigwait/sigsuspend; +1 per wake
  uint32_t nhandled = 0;                    // program handlers run on this G
  // The stack pointer of run_program's call of each of the outermost
  // kSigSpKept program handlers running on this G (insig deep): a longjmp
  // or siglongjmp to a frame outside a handler leaves it and every handler
  // nested in it (core/signal.cpp signal_longjmp).
  static constexpr int kSigSpKept = 3;
  uintptr_t sig_sp[kSigSpKept] = {};
  std::atomic<int> intr_signal{0};  // the signal that interrupted its wait
  // signal_deliver is choosing and taking the next signal for a handler
  // (core/signal.cpp): a delivery nested in it (goshim's preemption or
  // kick handler) would run a later signal first. Written and read on this
  // G only (its own handlers).
  bool delivering = false;
  bool unwind_guarded = false;     // in blocking_cancellable (syscalls/blocking.hpp)
  std::atomic<bool> guarded_async{false};  // its asynchronous cancel type suspended there (blocking_guarded)
  bool kwait_cancellable = false;  // in a kernel wait that is a cancellation point (syncwait)
  // nhandled after the last program handler without SA_RESTART that ran on
  // this G: a wait restarts only if none ran since it began
  // (signal_restart_since).
  uint32_t last_norestart = 0;

  // GOSHIM_TRACE (trace.cpp): start of its current slice and block.
  int64_t trace_start = 0;
  int64_t trace_block_start = 0;
  int16_t trace_p = -1;

  // fd readiness waits and sleeps (core/gwait.hpp): the one-shot wake
  // token of the current wait, and the record of a single-fd wait.
  std::atomic<uint64_t> wtoken{0};
  PollWaiter pw;
  // The M window holding its latest CPU time entry (core/cputime.hpp;
  // written by the M running the G). At the end: the fields above keep
  // their places (in the middle, shifted by 16 bytes, a 2-processor
  // ping-pong was slower).
  M* cpu_win_m = nullptr;
  uint32_t cpu_win_gen = 0;
  uint8_t cpu_win_idx = 0;

  bool is_g0() const { return flags & kGFlagG0; }
  bool is_main() const { return flags & kGFlagMain; }
  // Whether goshim serves the calls this G makes: a user G (not g0),
  // running, not inside a program signal handler (nor a blocking call a
  // handler interrupted). The one place for this rule: shim::user_g,
  // shim::preempt_check and the fd layer's fd_user_g build on it.
  bool serves_calls() const {
    return !(flags & kGFlagG0) && status.load(std::memory_order_relaxed) == GStatus::Running &&
           insig == 0;
  }
};

inline constexpr uint32_t kGMagic = 0x676f7368;  // "gosh"

// join_state bits
enum : uint32_t {
  kJoinDetached = 1u << 0,
  kJoinExited = 1u << 1,
  kJoinJoining = 1u << 2,  // a joiner has claimed the G
};

// ---------------------------------------------------------------------------
// An M's CPU time window (core/cputime.hpp). Written only by the M's own
// thread; other threads read gen, last, rate and entries racily (estimates).
struct CpuEntry {
  G* g;
  uint64_t ticks;
  uint8_t tag;  // g's incarnation (G::cpu_word's high byte) when it ran
};
struct CpuWindow {
  static constexpr int kEntries = 16;
  uint64_t last = 0;         // ticks at the last accounting point (0: not started)
  uint64_t opened = 0;       // ticks when the window opened
  uint64_t total = 0;        // ticks in it: the entries' and the M's own
  uint64_t close_ticks = 3000000;  // ~kCloseNs in ticks
  int64_t start_cpu = 0;     // the kernel thread's CPU clock (ns) when it opened
  uint64_t rate_q32 = 0;     // the last closed window's CPU ns per tick, << 32 (0: none)
  uint64_t block_at = 0;     // ticks when the running G's blocking call began (0: none)
  uint64_t sw_tick = 0;      // park's reading for its continuation (core/park.cpp)
  bool quick = false;        // find_runnable found the next G on its first look
  uint32_t gen = 1;          // the window's number (G::cpu_win_gen)
  uint32_t n = 0;            // entries used
  CpuEntry ent[kEntries];
};

struct M {
  G g0;                     // scheduler G: its stack and TLS are the M's own
  G* curg = nullptr;        // the user G running, or nullptr on g0
  P* p = nullptr;           // attached P, or nullptr
  P* nextp = nullptr;       // P handed over by startm (newm: kept for it, sched.lock)
  M* startlink = nullptr;   // newm's Ms queued for the M starter (runtime.cpp), sched.lock
  bool starting = false;    // on that list: its thread is not running yet
  P* oldp = nullptr;        // P held before entering a blocking call
  int32_t id = 0;
  pid_t tid = 0;            // kernel tid
  bool spinning = false;    // looking for work (counted in sched.nmspinning)
  bool blocked = false;     // in notesleep or netpoll
  Note park;                // stopm sleeps here
  M* schedlink = nullptr;   // sched.midle link
  // Put on sched.midle by find_runnable as it gave its P up, before the
  // rest of its way to stopm (sched.lock; see listed_early in sched.cpp).
  bool listed_early = false;
  M* alllink = nullptr;     // allm list
  uintptr_t g0_sp = 0;      // g0 stack pointer used by every mcall
  std::atomic<int32_t> locks{0};  // >0: in a runtime critical section
  LockRankHeld lockranks;          // runtime locks held (debug build's checker)
  // The allocator's lock (a pthread_mutex_t of core/jemalloc_glue.cpp)
  // this M sleeps on in the kernel, or null; sysmon's check_m asks who
  // holds it (alloc_lock_holder). Written only by this M's thread (a
  // program handler that interrupts the wait suspends it: signal.cpp's
  // run_program, alloc_wait_suspend).
  std::atomic<void*> alloc_lock_wait{nullptr};
  std::atomic<bool> preempt_sent{false};  // a preemption signal is in flight
  int64_t preempt_sent_at = 0;            // when (sysmon only)
  bool exit_requested = false;    // sysmon retires this idle M
  bool rt = false;                // its kernel thread has a real-time policy (core/rtlock.cpp)
  // The inherited priority applied to its kernel thread (core/pi.hpp), 0:
  // none; written under pi_lock, read by the M's scheduler.
  std::atomic<int32_t> pi_prio{0};
  bool dead = false;
  // jemalloc cache of this M's goroutines (core/mcache.hpp): index, -1 none
  // yet, -2 none to be had; taken for one allocation at a time.
  // (a line of its own: other threads write the fields around)
  alignas(64) std::atomic<int32_t> tcache{-1};
  // The G using the cache (tagged | 1: lent to a G that left this M
  // in the middle of an allocation, core/mcache.hpp), or nullptr.
  std::atomic<uintptr_t> tcache_owner{0};
  alignas(64) char tcache_pad_ = 0;
  uint64_t rand = 0;        // per-M fast random state
  // park continuation (park.cpp)
  bool (*waitunlockf)(G*, void*) = nullptr;
  void* waitlock = nullptr;
  // blocking-call and stall detection (sysmon)
  std::atomic<uint32_t> syscalltick{0};
  clockid_t cpuclock = 0;
  unsigned long pthread = 0;  // the real pthread_t of this kernel thread
  uint64_t cur_sigmask = 0;   // the kernel signal mask this M has now (read by others atomically)
  // Counts this M's passes through user-level points of its scheduler
  // loop and mask changes: seen to move, it says the M ran its own code
  // since, so any signal the kernel had handed it before has had its
  // handler run (signal_g_exit, wait_stale_ms).
  std::atomic<uint32_t> uprog{0};
  uint64_t start_sigmask = 0; // its creator's kernel mask (newm), for signal_new_m_mask
  // Signals this M is about to open in its kernel mask: sysmon counts them
  // as open here already (core/signal.cpp, "The kernel's order across takers").
  std::atomic<uint64_t> open_soon{0};
  // Signals sent to this M for a given G (bit 0: a routed process signal).
  // The mark, not the siginfo, says what a forward is: the kernel may
  // deliver a thread-directed signal without its siginfo (core/signal.cpp,
  // "Forwards").
  std::atomic<G*> sigfwd[65] = {};
  // goshim's own deliveries of the preemption signal sent to this M and not
  // yet arrived, counted by kind (core/preempt.cpp, "Kicks without their
  // siginfo").
  std::atomic<uint32_t> magic_sent[4] = {};
  // The signals with a sigfwd mark set: this M's kernel mask never blocks
  // them (core/signal.cpp, "Forwards"), so a forward is never left pending
  // on an M that no longer runs its G.
  std::atomic<uint64_t> fwd_bits{0};
  // The last G that ran here blocking SIGPIPE or SIGXFSZ, and its goid:
  // the owner of one the kernel raised for a write of its that goshim did
  // not see and left pending on this thread (core/signal.cpp, "Signals
  // raised by a call").
  G* raised_owner = nullptr;
  uint64_t raised_goid = 0;
  stack_t cur_altstack = {nullptr, SS_DISABLE, 0};  // and its sigaltstack
  // This M's own signal stack (core/signal.cpp, "The M's signal stack"):
  // its kernel sigaltstack whenever the G it runs has none (and on g0).
  // SS_DISABLE where frames are not moved (arch::kSigframeMove) or it could
  // not be had. sigstk_map/sigstk_maplen: the mapping, guard included.
  stack_t sigstk = {nullptr, SS_DISABLE, 0};
  void* sigstk_map = nullptr;
  size_t sigstk_maplen = 0;
  void* tracebuf = nullptr;   // GOSHIM_TRACE event buffer (trace.cpp)
  // Gs parked in netpoll, as counted on this M: +1 when one parks here, -1
  // when one is woken here (only the sum over allm and netpoll_epoll.cpp's
  // global means anything). Written only by this M: no locked instruction.
  std::atomic<int32_t> npwait{0};
  // CPU time accounting (core/cputime.hpp), written at every switch: last,
  // on lines of its own (in the middle of M, it shifted the fields above
  // and a 2-processor ping-pong was slower).
  alignas(64) CpuWindow cw;
};

// The M (the calling thread's own) ran user-level code of its own (M::uprog).
inline void m_progress(M* mp) {
  mp->uprog.store(mp->uprog.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// ---------------------------------------------------------------------------
inline constexpr uint32_t kRunqSize = 256;

struct P {
  int32_t id = 0;
  std::atomic<PStatus> status{PStatus::Idle};
  P* link = nullptr;  // sched.pidle link
  M* m = nullptr;     // owning M
  uint32_t schedtick = 0;    // incremented on every scheduler call that starts a new slice
  std::atomic<uint32_t> syscalltick{0};
  std::atomic<bool> preempt{false};

  // Local run queue (runq.cpp): lock-free ring, owner pushes at tail,
  // anyone consumes at head.
  std::atomic<uint32_t> runqhead{0};
  std::atomic<uint32_t> runqtail{0};
  std::atomic<G*> runq[kRunqSize];
  // The G to run next, inheriting the current time slice.
  std::atomic<G*> runnext{nullptr};
  // Gs run in a row from runnext, inheriting the time slice, since a G
  // ran a slice of its own; and sys::nanotime() when the first of them
  // started (owner only; execute, park's direct hand-off, runq_chain_over).
  uint32_t chain_len = 0;
  int64_t chain_start = 0;
  // The G that just left the P parked futilely: it was woken from an
  // object, woke another G on it, and waits on it again (park.cpp).
  bool park_futile = false;
  // Processor sharing at network calls (share_slice_check): the slice
  // (schedtick) it was last seen in, and when Gs were first seen waiting
  // during that slice (nanotime; 0: not yet). Owner only.
  uint32_t share_tick = 0;
  // steal_stalled's last look at schedtick (written by the busy poller only).
  uint32_t stall_seen_tick = ~0u;  // ~0: not looked at yet
  uint32_t stall_looks = 0;        // looks in a row that saw it
  int64_t share_since = 0;

  // Free Gs with their TLS blocks (owner P only).
  G* gfree = nullptr;
  int32_t ngfree = 0;

  TimerHeap timers;

  // Stacks of the default size, recycled without a lock (owner P only).
  static constexpr int kStackCache = 64;
  Stack stackcache[kStackCache];
  int32_t nstackcache = 0;

  // Replaced in allp by sysmon because its M stalled in the kernel: the M
  // keeps using it until it next enters the scheduler, which retires it.
  std::atomic<bool> retired{false};

  uint64_t nparks = 0;  // Gs parked on this P (owner P only; statistics)

  // The M in the blocking call this P waits on (set by enter_blocking; a
  // hint for sysmon, which reads it while the P is in PStatus::Syscall).
  std::atomic<M*> blocking_m{nullptr};

  // sysmon's view (sysmon.cpp); only sysmon touches these.
  uint32_t sm_schedtick = ~0u;  // ~0: not looked at yet
  int64_t sm_schedwhen = 0;
  uint32_t sm_syscalltick = 0;
  int64_t sm_syscallwhen = 0;
  int64_t sm_cputime = -1;  // its M's CPU time at the last look
  int64_t sm_stallwhen = 0;  // when that look was
  int64_t sm_slice_cpu = -1;  // its M's CPU time when sysmon first saw this slice
  int64_t sm_slice_when = 0;
  int64_t sm_sys_cpu = -1;  // in a blocking call: its M's CPU time at the first look
  int64_t sm_pinned_since = 0;  // retired: when its M stopped making progress
  bool sm_pinned_told = false;  // retired: the pinning report was written
};

// A FIFO of Gs linked through schedlink.
struct GQueue {
  G* head = nullptr;
  G* tail = nullptr;
  int32_t size = 0;
  bool empty() const { return head == nullptr; }
  void push_back(G* gp) {
    gp->schedlink = nullptr;
    if (tail)
      tail->schedlink = gp;
    else
      head = gp;
    tail = gp;
    size++;
  }
  void push_back_all(GQueue& q) {
    if (q.empty()) return;
    if (tail)
      tail->schedlink = q.head;
    else
      head = q.head;
    tail = q.tail;
    size += q.size;
    q = GQueue{};
  }
  G* pop() {
    G* gp = head;
    if (gp) {
      head = gp->schedlink;
      if (!head) tail = nullptr;
      size--;
    }
    return gp;
  }
};

// kMaxProcs: core/numparse.hpp (the launcher checks --procs against it).

struct Sched {
  Mutex lock{LockRank::Sched};
  // Idle Ms.
  M* midle = nullptr;
  int32_t nmidle = 0;
  int32_t mcount = 0;  // Ms created
  // Idle Ps.
  P* pidle = nullptr;
  std::atomic<int32_t> npidle{0};
  std::atomic<int32_t> nmspinning{0};
  std::atomic<uint32_t> needspinning{0};
  // Global run queue.
  GQueue runq;
  std::atomic<int32_t> runqsize{0};
  // readyat of runq's head (0: empty); written under lock, read without.
  std::atomic<uint64_t> runqheadat{0};
  // Global free G list (lock: gflock): warm ones newest first, and cold
  // ones, whose slot stack pages went back to the kernel (proc.cpp).
  Mutex gflock{LockRank::GFree};
  G* gfree = nullptr;
  G* gfree_cold = nullptr;
  int32_t ngfree = 0;
  // netpoll/timer coordination: 0 while an M is blocked in netpoll.
  std::atomic<int64_t> lastpoll{1};
  std::atomic<int64_t> pollUntil{0};
  std::atomic<uint32_t> pollingNet{0};
  // Live user Gs (excluding g0s). The process exits when it drops to 0.
  std::atomic<int64_t> ngoroutines{0};
  std::atomic<uint64_t> goidgen{1};
  // Statistics (GOSHIM_DEBUG=stats, schedtrace)
  std::atomic<uint64_t> nsteal{0};
  std::atomic<uint64_t> nparks{0};  // base of total_parks(): parks are counted per P (P::nparks)
  std::atomic<uint64_t> nhandoff{0};
  std::atomic<uint64_t> npreempt{0};
  // Gs readied by sysmon's network poll (nobody else polled for
  // kPollIdleNs) and by the scheduler's poll while its P had work queued
  // (find_runnable, kBusyPollNs); Gs taken from the global queue ahead of
  // the local ring because they were older (runq_pick).
  std::atomic<uint64_t> npollsysmon{0};
  std::atomic<uint64_t> npollbusy{0};
  std::atomic<uint64_t> nglobolder{0};
  std::atomic<uint64_t> ngcreated{0};
  std::atomic<int64_t> ngpeak{0};

  int32_t gomaxprocs = 1;
  // allp[i] is the P with id i. Sysmon may replace one (a stalled M's) by
  // a spare: readers load each entry once and use that P.
  std::atomic<P*> allp[kMaxProcs] = {};
  P* pspare = nullptr;  // retired Ps for reuse (lock: sched.lock)
  std::atomic<uint64_t> nstalls{0};  // Ps replaced because their M stalled
  Mutex allmlock{LockRank::Allm};
  M* allm = nullptr;
};

extern Sched sched;

// The current G: the G whose TLS block is installed. Per TLS block, so it
// never changes for a given block: a user G's block says that G, an M's own
// TCB says its g0, a foreign thread's says nullptr.
extern __thread G* tls_g __attribute__((tls_model("initial-exec")));

inline G* getg() { return tls_g; }

// The P with id i (sysmon may swap it for a spare: load once, then use).
inline P* allp(int i) { return sched.allp[i].load(std::memory_order_acquire); }

// Runtime critical section on the current M: no preemption, no parking, and
// the shim passes calls from signal handlers to libc. Returns the M.
// Only the M's own thread writes M::locks (others, and its signal handlers,
// only read it), so a plain load and store do: no locked instruction.
inline M* acquirem() {
  M* mp = getg()->m;
  mp->locks.store(mp->locks.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return mp;
}
inline void releasem(M* mp) {
  mp->locks.store(mp->locks.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

// True when the runtime is up and goroutines are in use (false in pass-through).
extern std::atomic<bool> runtime_up;

}  // namespace goshim
