// fork under M:N (see fork.hpp).
#include "core/fork.hpp"

#include <pthread.h>
#include <signal.h>

#include <new>

#include "core/cputime.hpp"
#include "core/fdtable.hpp"
#include "core/lockrank.hpp"
#include "core/memclass.hpp"
#include "core/netpoll.hpp"
#include "core/pi.hpp"
#include "core/ownthread.hpp"
#include "core/preempt.hpp"
#include "core/privfd.hpp"
#include "core/proc.hpp"
#include "core/rawlog.hpp"
#include "core/real.hpp"
#include "core/sched.hpp"
#include "core/sema.hpp"
#include "core/sharedwatch.hpp"
#include "core/setxid.hpp"
#include "core/signal.hpp"
#include "core/stack.hpp"
#include "core/sysmon.hpp"
#include "core/tls.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

constexpr int kMaxHooks = 32;
void (*hooks[kMaxHooks])();
int nhooks;
std::atomic<long> reset_pid{0};

void reset_p(P* pp) {
  pp->runqhead.store(0, std::memory_order_relaxed);
  pp->runqtail.store(0, std::memory_order_relaxed);
  pp->runnext.store(nullptr, std::memory_order_relaxed);
  // Free Gs and stacks cached here may have been half-moved by another M
  // at the moment of fork: forget them (their memory is not reused).
  pp->gfree = nullptr;
  pp->ngfree = 0;
  pp->nstackcache = 0;
  pp->timers.lock.reset();
  pp->timers.len = 0;
  pp->timers.when0.store(0, std::memory_order_relaxed);
  pp->m = nullptr;
  pp->link = nullptr;
  pp->status.store(PStatus::Idle, std::memory_order_relaxed);
  pp->retired.store(false, std::memory_order_relaxed);
  pp->preempt.store(false, std::memory_order_relaxed);
  pp->sm_schedtick = ~0u;
  pp->sm_syscalltick = 0;
  pp->sm_cputime = -1;
  pp->sm_stallwhen = 0;
}

// The Gs of other threads are gone: mark them so that no pthread_t of the
// parent's threads resolves to a goroutine here.
void forget_other_gs(G* self) {
  size_t n = arena_nslots();
  for (size_t i = 0; i < n; i++) {
    G* gp = arena_slot_g(i);
    if (gp == self || gp->magic != kGMagic) continue;
    gp->status.store(GStatus::Idle, std::memory_order_relaxed);
    gp->magic = 0;  // never handed out again: its stack may be half in use
  }
  G* g1 = main_g();
  if (g1 != self) g1->status.store(GStatus::Idle, std::memory_order_relaxed);
}

// The calling thread is in the shim's fork wrapper (fork_wrapper_begin).
__thread bool in_fork_wrapper __attribute__((tls_model("initial-exec")));
// This child's threads wait for fork_wrapper_end.
bool threads_deferred;

void after_fork_child() { fork_child_reset(); }

// 1:1 mode: the pid whose state fork_child_reset_1to1 reset.
std::atomic<long> reset_pid_1to1{0};

}  // namespace

bool fork_is_child() { return reset_pid.load(std::memory_order_relaxed) != 0; }

void register_fork_child_hook(void (*fn)()) {
  if (nhooks >= kMaxHooks) fatal("too many fork hooks");
  hooks[nhooks++] = fn;
}

void fork_init() {
  register_fork_child_hook(sema_after_fork);
  register_fork_child_hook(watch_after_fork);
  register_fork_child_hook(stack_after_fork);
  register_fork_child_hook(tls::after_fork);
  register_fork_child_hook(preempt_after_fork);
  register_fork_child_hook(setxid_after_fork);
  register_fork_child_hook(netpoll_after_fork);
  register_fork_child_hook(sysmon_after_fork);
  if (pthread_atfork(nullptr, nullptr, after_fork_child) != 0)
    fatal("cannot register the fork child handler");
}

void fork_init_1to1() {
  if (pthread_atfork(nullptr, nullptr, fork_child_reset_1to1) != 0)
    fatal("cannot register the fork child handler");
}

void fork_child_reset_1to1() {
  long pid = sys::getpid();
  if (reset_pid_1to1.load(std::memory_order_relaxed) == pid) return;
  reset_pid_1to1.store(pid, std::memory_order_relaxed);
  // Every thread is a kernel thread, but the program's calls still go
  // through goshim's fd table (reference counts, the tentative references
  // close waits for, descriptor locks) and its semaphore buckets (bucket
  // locks, queued waiters): what the parent's other threads held or were
  // counted in at the fork describes threads the child does not have (a
  // close in the child spun for ever on a parent thread's tentative
  // reference). No epoll instance or scheduler to reset in this mode.
  lock_rank_after_fork();
  sema_after_fork();
  pi_after_fork();  // (a fork child hook in M:N)
  fd_fork_child();
}

void fork_child_reset() {
  long pid = sys::getpid();
  if (reset_pid.load(std::memory_order_relaxed) == pid) return;
  reset_pid.store(pid, std::memory_order_relaxed);

  G* gp = getg();
  M* mp = (gp && gp->m) ? gp->m : nullptr;
  P* mine = mp ? mp->p : nullptr;
  if (gp && gp->is_g0()) gp = nullptr;  // fork from g0 (never) or a foreign thread

  // Locks: whoever held them is gone.
  sched.lock.reset();
  sched.gflock.reset();
  sched.allmlock.reset();
  lock_rank_after_fork();

  // Ms: this one alone.
  for (M* m = sched.allm; m; m = m->alllink)
    if (m != mp) m->dead = true;
  sched.allm = mp;
  if (mp) {
    mp->alllink = nullptr;
    mp->schedlink = nullptr;
    mp->spinning = false;
    mp->blocked = false;
    mp->nextp = nullptr;
    mp->oldp = nullptr;
    mp->locks.store(0, std::memory_order_relaxed);
    mp->preempt_sent.store(false, std::memory_order_relaxed);
    for (auto& c : mp->magic_sent) c.store(0, std::memory_order_relaxed);  // sent to the parent's thread
    mp->tid = (pid_t)sys::gettid();
    // Kernel registrations of this thread belong to its g0 block, not to
    // the goroutine's (glibc's fork wrote the child's tid into the
    // goroutine's TCB and pointed clear_child_tid at it).
    tls::set_tid(mp->g0.tp, mp->tid);
    sys::set_tid_address((int*)(mp->g0.tp + tls::L.tid));
    sys::set_robust_list((void*)(mp->g0.tp + tls::L.robust_head), 24);
  }
  sched.midle = nullptr;
  sched.nmidle = 0;
  sched.mcount = mp ? 1 : 0;

  // Ps: all idle but this M's, queues and timers empty.
  sched.pspare = nullptr;
  sched.pidle = nullptr;
  sched.npidle.store(0, std::memory_order_relaxed);
  if (mine && allp(mine->id) != mine) sched.allp[mine->id].store(mine, std::memory_order_relaxed);
  for (int i = 0; i < sched.gomaxprocs; i++) reset_p(allp(i));
  for (int i = sched.gomaxprocs - 1; i >= 0; i--) {
    P* pp = allp(i);
    if (pp == mine) continue;
    pp->link = sched.pidle;
    sched.pidle = pp;
    sched.npidle.fetch_add(1, std::memory_order_relaxed);
  }
  if (mine) {
    mine->m = mp;
    mine->status.store(PStatus::Running, std::memory_order_relaxed);
  }
  sched.runq = GQueue{};
  sched.runqsize.store(0, std::memory_order_relaxed);
  sched.runqheadat.store(0, std::memory_order_relaxed);
  sched.gfree = nullptr;
  sched.gfree_cold = nullptr;
  sched.ngfree = 0;
  sched.nmspinning.store(0, std::memory_order_relaxed);
  sched.needspinning.store(0, std::memory_order_relaxed);
  sched.lastpoll.store(sys::nanotime(), std::memory_order_relaxed);
  sched.pollUntil.store(0, std::memory_order_relaxed);
  sched.pollingNet.store(0, std::memory_order_relaxed);

  // Gs: only the caller survives.
  forget_other_gs(gp);
  sched.ngoroutines.store(gp ? 1 : 0, std::memory_order_relaxed);
  if (gp) {
    tls::set_tid(gp->tp, gp->vtid);
    gp->preempt.store(false, std::memory_order_relaxed);
    if (mp) cputime_after_fork(gp, mp);  // the child's thread starts with no CPU time
  }
  privfd_after_fork();  // first: the parent's thread is gone, reads run here until it starts
  signal_after_fork(gp, mp);

  if (char* st = real::lazy::__libc_single_threaded()) *st = 0;
  for (int i = 0; i < nhooks; i++) hooks[i]();
  memclass_init();
  mstarter_after_fork();
  // goshim's own threads. glibc runs the atfork child handlers in the
  // order they were registered, goshim's (at start-up) first: when the
  // process allocator is the program's own, the program's handler that
  // releases its allocator lock (taken by its prepare handler, as every
  // allocator does) has not run yet, and pthread_create would calloc into
  // it. The fork wrapper then starts them once glibc's fork returns
  // (fork_wrapper_end); a fork that does not go through it (glibc's
  // internal ones, daemon) starts them here. Until then the child runs on
  // its one M (privfd reads on their callers; a needed M, or a watcher,
  // is not started: fork_child_start_threads).
  if (own_allocator() && in_fork_wrapper) {
    threads_deferred = true;
    return;
  }
  fork_child_start_threads();
}

void fork_child_start_threads() {
  threads_deferred = false;
  if (own_allocator()) privfd_start();  // else at the child's first thread (core/privfd.hpp)
  mstarter_start();
  sysmon_start();
}

void fork_wrapper_begin() { in_fork_wrapper = true; }

void fork_wrapper_end(bool child) {
  in_fork_wrapper = false;
  if (child && threads_deferred) fork_child_start_threads();
}

}  // namespace goshim
