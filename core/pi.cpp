// Priority inheritance for PTHREAD_PRIO_INHERIT mutexes (see pi.hpp).
#include "core/pi.hpp"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>

#include "core/fork.hpp"
#include "core/lockrank.hpp"
#include "core/proc.hpp"
#include "core/rtlock.hpp"
#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "core/tcb.hpp"
#include "syscalls/sys.hpp"

#include <sys/mman.h>

namespace goshim {

std::atomic<int32_t> pi_nwaiters{0};

// A kernel thread's registered wait (G::pi_wait for a goroutine).
__thread PiWaiter* foreign_pi_wait __attribute__((tls_model("initial-exec")));

namespace {

// pi_lock: a kernel PI futex on the kernel tid of its holder, so that a
// real-time thread waiting for it raises a SCHED_OTHER holder (a waiter
// registering, an M switching Gs) above whatever else wants the CPU. A
// leaf: nothing is taken under it. The holder is pinned to its M
// (M::locks) and never parks.
class PiLock {
 public:
  void lock(uint32_t tid) {
    uint32_t z = 0;
    if (__builtin_expect(!w_.compare_exchange_strong(z, tid, std::memory_order_acquire), 0)) {
      for (;;) {
        long r = sys::futex(&w_, FUTEX_LOCK_PI_PRIVATE, 0, nullptr, nullptr, 0);
        if (r == 0) break;  // taken
        if (r == -EINTR || r == -EAGAIN) continue;  // EAGAIN: the owner is exiting
        // No PI futex here (an emulator without it): take it by spinning,
        // sleeping in between (a real-time spinner must let the holder run).
        for (;;) {
          uint32_t e = 0;
          if (w_.compare_exchange_strong(e, tid, std::memory_order_acquire)) break;
          struct timespec ts = {0, 50 * 1000};
          sys::nanosleep(&ts, nullptr);
        }
        break;
      }
    }
    lock_rank_acquire(LockRank::Pi, this, true);
  }
  void unlock(uint32_t tid) {
    lock_rank_release(LockRank::Pi, this);
    uint32_t t = tid;
    if (__builtin_expect(!w_.compare_exchange_strong(t, 0, std::memory_order_release), 0))
      sys::futex(&w_, FUTEX_UNLOCK_PI_PRIVATE, 0, nullptr, nullptr, 0);
  }
  void reset() { w_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> w_{0};
};

PiLock pi_lock;
// Under pi_lock:
PiWaiter* waiters = nullptr;  // registered waits
G* boosted = nullptr;         // Gs with pi_boost != 0 (G::pi_blink)
int32_t nrt = 0;              // registered waits with a priority of their own (base > 0)
uint32_t epoch = 0;

// A kernel thread's scheduling as m_apply sets it.
struct KSched {
  int pol = SCHED_OTHER;
  struct sched_param sp = {};
};

KSched ksched_for(G* gp, int boost) {
  KSched k;
  if (gp && gp->rt_locked && rt_policy(gp->sched_policy)) {
    int own = gp->rt_pp_max > gp->sched_priority ? gp->rt_pp_max : gp->sched_priority;
    k.pol = gp->sched_policy & ~SCHED_RESET_ON_FORK;
    k.sp.sched_priority = own > boost ? own : boost;
  } else if (boost > 0) {
    k.pol = SCHED_FIFO;
    k.sp.sched_priority = boost;
  } else if (gp && gp->rt_locked) {
    k.pol = gp->sched_policy & ~SCHED_RESET_ON_FORK;  // a bound G's SCHED_BATCH, SCHED_IDLE
  }
  return k;
}

void ksched_set(pid_t tid, const KSched& k) {
  if (rt_policy(k.pol)) {
    sys::sched_setscheduler(tid, k.pol | SCHED_RESET_ON_FORK, &k.sp);
  } else if (sys::sched_setscheduler(tid, k.pol, &k.sp) < 0) {
    // Without the privilege, clearing SCHED_RESET_ON_FORK is refused.
    sys::sched_setscheduler(tid, k.pol | SCHED_RESET_ON_FORK, &k.sp);
  }
}

// The holder of pi_lock never lowers its own kernel thread while it holds
// it: the kernel would at once run a real-time thread in its place, one
// that may wait for pi_lock (its PI futex then raises the holder again, but
// the holder loses the CPU for the round trip, and every real-time thread
// of a lower priority than the waiter's runs first). The lowering waits
// here (under pi_lock) until PiGuard has let go.
struct Deferred {
  pid_t tid = 0;  // 0: nothing deferred
  KSched k;
  M* mp = nullptr;  // an M's (else a foreign owner's, foreign_fix)
  G* gp = nullptr;
  int boost = 0;
};
Deferred deferred;
uint32_t holder_tid = 0;  // under pi_lock
int32_t nraised = 0;      // Ms with pi_prio != 0 (under pi_lock)

// Kernel threads that are not goroutines (every thread in 1:1 mode, a
// thread started before goshim's, glibc's helper threads), raised as
// owners: their own scheduling, read when first raised, is given back.
// Under pi_lock. As many as there are: the table starts with
// kForeignFirst slots and doubles into memory mapped for it (a system
// call, no lock: allowed under the leaf pi_lock; failing to map is fatal,
// never an owner silently left unraised). A slot is freed in the
// recomputation in which nobody waits for its owner any more, so the
// slots in use never exceed the registered waits plus the owners a
// recomputation adds (at most one a wait).
struct Foreign {
  pid_t tid = 0;    // 0: a free slot
  int applied = 0;  // the boost on its kernel thread now
  int nw = 0;       // recomputation's scratch
  bool have_own = false;  // own read (from then on until the slot is freed
                          // its kernel thread may be raised)
  KSched own;
};
constexpr int kForeignFirst = 32;
Foreign foreign_first[kForeignFirst];
Foreign* foreign = foreign_first;
int foreign_cap = kForeignFirst;
int nforeign = 0;  // slots in use (read without pi_lock by pi_own_sched)

// A fork child's copy of the parent's table (pi_after_fork), for
// pi_fork_child_self; the static table's slots copied here.
Foreign foreign_stash_first[kForeignFirst];
Foreign* stash = nullptr;
int stash_cap = 0;

// Under pi_lock: twice the slots, the old ones copied.
void foreign_grow() {
  if (foreign_cap > (1 << 24)) fatal("priority inheritance: too many kernel-thread owners");
  int cap = foreign_cap * 2;
  size_t bytes = (size_t)cap * sizeof(Foreign);
  void* p = sys::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fatal("priority inheritance: cannot map the raised owners' table");
  Foreign* n = (Foreign*)p;
  for (int i = 0; i < cap; i++) n[i] = i < foreign_cap ? foreign[i] : Foreign{};
  // The new table is published (the pointer, then the larger count) before
  // the old one is unmapped: a fork at any point of this leaves the child
  // (pi_after_fork) a mapped table and a count within it.
  Foreign* old = foreign;
  int old_cap = foreign_cap;
  __atomic_store_n(&foreign, n, __ATOMIC_RELEASE);
  __atomic_store_n(&foreign_cap, cap, __ATOMIC_RELEASE);
  if (old != foreign_first) sys::munmap(old, (size_t)old_cap * sizeof(Foreign));
}

int foreign_find(pid_t tid, bool add) {
  int free_slot = -1;
  for (int i = 0; i < foreign_cap; i++) {
    if (foreign[i].tid == tid) return i;
    if (!foreign[i].tid && free_slot < 0) free_slot = i;
  }
  if (!add) return -1;
  if (free_slot < 0) {
    free_slot = foreign_cap;
    foreign_grow();
  }
  foreign[free_slot] = Foreign{};
  foreign[free_slot].tid = tid;
  __atomic_store_n(&nforeign, nforeign + 1, __ATOMIC_RELAXED);
  return free_slot;
}

// After a deferred lowering of a foreign owner (PiGuard): what it has now.
void foreign_fix(pid_t tid, int boost);

class PiGuard {
 public:
  PiGuard() {
    G* g = tls_g;
    mp_ = g ? g->m : nullptr;
    if (mp_) {
      mp_->locks.store(mp_->locks.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      tid_ = (uint32_t)mp_->tid;
    } else {
      tid_ = (uint32_t)sys::gettid();
    }
    pi_lock.lock(tid_);
    holder_tid = tid_;
  }
  ~PiGuard() {
    Deferred d = deferred;
    deferred = Deferred{};
    holder_tid = 0;
    pi_lock.unlock(tid_);
    if (d.tid) {
      ksched_set(d.tid, d.k);
      // A waiter raised it again meanwhile (under pi_lock), and the line
      // above undid that: apply what is recorded now.
      if (d.mp && d.mp->pi_prio.load(std::memory_order_acquire) != d.boost) {
        pi_lock.lock(tid_);
        ksched_set(d.tid, ksched_for(d.gp, d.mp->pi_prio.load(std::memory_order_relaxed)));
        pi_lock.unlock(tid_);
      } else if (!d.mp) {
        pi_lock.lock(tid_);
        foreign_fix(d.tid, d.boost);
        pi_lock.unlock(tid_);
      }
    }
    if (mp_) mp_->locks.store(mp_->locks.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
  PiGuard(const PiGuard&) = delete;
  PiGuard& operator=(const PiGuard&) = delete;

 private:
  M* mp_;
  uint32_t tid_;
};

constexpr int kTidMask = 0x3fffffff;  // FUTEX_TID_MASK

// The owner a lock word's tid v names, in this process's terms: a
// process-shared mutex records a goroutine's shared id (tcb::shared_tid),
// here turned back into its virtual tid; a kernel tid stays as it is.
int owner_tid(const PiWaiter* w, int v) { return w->shared ? tcb::tid_of_shared(v) : v; }

// Whether kernel tid v is a thread of this process (a process-shared
// mutex's owner may be another process's thread: never raised from here).
bool tid_is_ours(int v) { return sys::tgkill(sys::getpid(), v, 0) == 0; }

// The goroutine virtual tid v (owner_tid) names, or nullptr.
G* owner_of(int v) {
  if (!is_virtual_tid(v)) return nullptr;
  G* g = g_from_vtid(v);
  if (!g) return nullptr;
  GStatus s = g->status.load(std::memory_order_acquire);
  if (s == GStatus::Idle || s == GStatus::Dead) return nullptr;
  return g;
}

// Under pi_lock. Sets mp's kernel thread to what gp (running on it, or
// nullptr: none) gets with the inherited priority boost: SCHED_FIFO at
// boost, or a bound real-time G's own policy at the higher of its own
// priority and boost; without a boost, a bound G's own policy, else
// SCHED_OTHER.
void m_apply(M* mp, G* gp, int boost) {
  int had = mp->pi_prio.load(std::memory_order_relaxed);
  mp->pi_prio.store(boost, std::memory_order_release);  // also on failure: no retry loop
  nraised += (boost > 0) - (had > 0);
  if ((uint32_t)mp->tid == holder_tid && boost < had) {
    // PiGuard lowers it once pi_lock is free.
    deferred = Deferred{mp->tid, ksched_for(gp, boost), mp, gp, boost};
    return;
  }
  if (deferred.tid == mp->tid) deferred = Deferred{};  // raised again before it was lowered
  ksched_set(mp->tid, ksched_for(gp, boost));
}

// Under pi_lock: whether gp, of boost b, waits on a run queue for an M.
bool queued_for_m(G* gp, int b) {
  return b && gp->status.load(std::memory_order_acquire) == GStatus::Runnable;
}

// Under pi_lock: every M's kernel thread gets what it runs asks for: the
// boost of its G (0 for an unboosted one); an M without a G (in its
// scheduler loop, asleep, or not started yet) the highest boost of a G on
// a run queue (queued), since as a SCHED_OTHER thread beside a real-time
// one it might never get the CPU to take it; self's M the higher of self's
// boost and queued (it gives its M to the next G at once). The scheduler
// side (pi_sched_in) reads without pi_lock: an M that started to run
// another G just as it was raised here runs it raised until its next
// switch or the next recomputation (a real-time waiter recomputes every
// kPiRecheckNs, and its leaving recomputes once more).
void reconcile(int queued, G* self) {
  for (M* mp = __atomic_load_n(&sched.allm, __ATOMIC_ACQUIRE); mp; mp = mp->alllink) {
    if (mp->dead || __atomic_load_n(&mp->tid, __ATOMIC_ACQUIRE) == 0) continue;
    G* c = __atomic_load_n(&mp->curg, __ATOMIC_ACQUIRE);
    int want;
    if (self && mp == self->m) {
      c = self;
      want = self->pi_boost.load(std::memory_order_relaxed);
      if (queued > want) want = queued;
    } else if (c) {
      want = c->pi_boost.load(std::memory_order_relaxed);
    } else {
      want = queued;
    }
    if (mp->pi_prio.load(std::memory_order_relaxed) != want) m_apply(mp, c, want);
  }
}

// A foreign owner's kernel thread at boost b: its own scheduling if that
// is a real-time one of b or above, else SCHED_FIFO at b (0: its own).
KSched foreign_ksched(const Foreign& f, int b) {
  KSched k = f.own;
  if (b > 0 && !(rt_policy(f.own.pol) && f.own.sp.sched_priority >= b)) {
    k.pol = rt_policy(f.own.pol) ? f.own.pol : SCHED_FIFO;
    k.sp = {};
    k.sp.sched_priority = b;
  }
  return k;
}

// Under pi_lock: foreign[i] gets its boost nw (0: its own back).
void foreign_apply(int i) {
  Foreign& f = foreign[i];
  int b = f.nw;
  if (b != f.applied) {
    if (f.applied == 0) {
      long pol = sys::sched_getscheduler(f.tid);
      if (pol < 0 || sys::sched_getparam(f.tid, &f.own.sp) < 0) {  // gone
        f.tid = 0;
        __atomic_store_n(&nforeign, nforeign - 1, __ATOMIC_RELAXED);
        return;
      }
      f.own.pol = (int)pol;  // SCHED_RESET_ON_FORK included: given back as it was
      f.have_own = true;
    }
    KSched k = foreign_ksched(f, b);
    if ((uint32_t)f.tid == holder_tid && b < f.applied) {
      deferred = Deferred{f.tid, k, nullptr, nullptr, b};  // as in m_apply
    } else {
      if (deferred.tid == f.tid) deferred = Deferred{};
      // Its own policy back as it was (SCHED_RESET_ON_FORK included).
      sys::sched_setscheduler(f.tid, k.pol, &k.sp);
    }
    f.applied = b;
  }
  if (b == 0) {
    f.tid = 0;
    __atomic_store_n(&nforeign, nforeign - 1, __ATOMIC_RELAXED);
  }
}

void foreign_fix(pid_t tid, int boost) {
  int i = foreign_find(tid, false);
  int now = i >= 0 ? foreign[i].applied : 0;
  if (now != boost && i >= 0) {
    KSched k = foreign_ksched(foreign[i], now);
    sys::sched_setscheduler(tid, k.pol, &k.sp);
  }
}

uint32_t next_epoch() {
  if (++epoch == 0) ++epoch;
  return epoch;
}

// Under pi_lock: every goroutine's pi_boost from the registered waits.
// self: the calling goroutine, which will give its M to the next G at once
// (it unlocked and yields, or parks), or nullptr. A boosted G that waits
// on a run queue (the one that unlocking woke, typically on self's P) gets
// the Ms that may run it raised: self's own first, which keeps the higher
// of its own boost and that one until it runs a G. Returns the highest
// boost of a queued G, 0 if none.
int recompute_locked(G* self = nullptr) {
  uint32_t e1 = next_epoch();
  auto touch = [e1](G* g) {
    if (g->pi_epoch != e1) {
      g->pi_epoch = e1;
      g->pi_new = 0;
    }
  };
  int n = 0;
  for (G* g = boosted; g; g = g->pi_blink) touch(g);
  for (int i = 0; i < foreign_cap; i++) foreign[i].nw = 0;
  for (PiWaiter* w = waiters; w; w = w->next) {
    n++;
    int raw = __atomic_load_n(w->word, __ATOMIC_ACQUIRE) & kTidMask;
    int v = owner_tid(w, raw);
    // Another process's owner, known from an earlier recomputation: no
    // goroutine or kernel thread here to raise (not looked up again).
    if (w->shared && raw && raw == __atomic_load_n(&w->notours, __ATOMIC_RELAXED)) {
      w->owner = nullptr;
      w->fowner = -1;
      if (w->g) touch(w->g);
      continue;
    }
    w->owner = owner_of(v);
    if (w->owner == w->g) w->owner = nullptr;  // a self-deadlock gives nothing
    if (w->owner) touch(w->owner);
    if (w->g) touch(w->g);
    // A kernel thread's tid: a foreign owner (a private mutex: of this
    // process; a process-shared one: only if it is).
    w->fowner = -1;
    if (!w->owner && v && !is_virtual_tid(v) && v != w->ktid) {
      w->fowner = foreign_find(v, false);
      if (w->fowner < 0 && (!w->shared || tid_is_ours(v))) w->fowner = foreign_find(v, true);
    }
    // A process-shared mutex whose word names no thread of this process
    // (a goroutine's shared id that decodes to none, a kernel tid that is
    // no thread here): remembered for as long as the word names it, so
    // that neither this nor the waiter's slices (pi_recompute_now) look
    // again (two system calls each time for a kernel tid).
    if (w->shared && raw && !w->owner && w->fowner < 0 && v != w->ktid)
      __atomic_store_n(&w->notours, raw, __ATOMIC_RELAXED);
  }
  // A foreign waiter that owns another mutex passes on what it inherits.
  for (PiWaiter* w = waiters; w; w = w->next)
    w->fwaiter = !w->g && w->ktid ? foreign_find(w->ktid, false) : -1;
  // Each waiter gives its owner the higher of its own priority and what it
  // inherits; n rounds carry a priority down the longest chain.
  for (int round = 0; round <= n; round++) {
    bool changed = false;
    for (PiWaiter* w = waiters; w; w = w->next) {
      if (!w->owner && w->fowner < 0) continue;
      int p = w->base;
      if (w->g && w->g->pi_new > p) p = w->g->pi_new;
      if (w->fwaiter >= 0 && foreign[w->fwaiter].nw > p) p = foreign[w->fwaiter].nw;
      int* to = w->owner ? &w->owner->pi_new : &foreign[w->fowner].nw;
      if (p > *to) {
        *to = p;
        changed = true;
      }
    }
    if (!changed) break;
  }
  uint32_t e2 = next_epoch();
  G* old = boosted;
  boosted = nullptr;
  int queued = 0;  // the highest boost of a G on a run queue
  auto settle = [e2, &queued](G* g) {
    if (g->pi_epoch == e2) return;
    g->pi_epoch = e2;
    int b = g->pi_new;
    g->pi_boost.store(b, std::memory_order_relaxed);
    if (b) {
      g->pi_blink = boosted;
      boosted = g;
    }
    if (queued_for_m(g, b) && b > queued) queued = b;
  };
  for (G* g = old; g;) {
    G* nx = g->pi_blink;
    settle(g);
    g = nx;
  }
  for (PiWaiter* w = waiters; w; w = w->next) {
    if (w->owner) settle(w->owner);
    if (w->g) settle(w->g);
  }
  reconcile(queued, self);
  for (int i = 0; i < foreign_cap; i++)
    if (foreign[i].tid) foreign_apply(i);
  return queued;
}

}  // namespace

void pi_after_fork() {
  // Only the forking thread lives on: no other waits, no boosts.
  pi_lock.reset();
  waiters = nullptr;
  boosted = nullptr;
  nrt = 0;
  nraised = 0;
  // The parent's table, kept for pi_fork_child_self (the forking thread's
  // own scheduling), and a fresh static one: the child never writes to
  // what a grow in the parent may have left half done (foreign_grow
  // publishes before it unmaps, so the copy is mapped and within its count).
  Foreign* t = __atomic_load_n(&foreign, __ATOMIC_ACQUIRE);
  int cap = __atomic_load_n(&foreign_cap, __ATOMIC_ACQUIRE);
  stash_cap = 0;
  stash = nullptr;
  if (__atomic_load_n(&nforeign, __ATOMIC_RELAXED) > 0) {
    if (t == foreign_first) {
      for (int i = 0; i < kForeignFirst; i++) foreign_stash_first[i] = foreign_first[i];
      t = foreign_stash_first;
      cap = kForeignFirst;
    }
    stash = t;
    stash_cap = cap;
  } else if (t != foreign_first) {
    sys::munmap(t, (size_t)cap * sizeof(Foreign));
  }
  for (int i = 0; i < kForeignFirst; i++) foreign_first[i] = Foreign{};
  foreign = foreign_first;
  foreign_cap = kForeignFirst;
  nforeign = 0;
  deferred = Deferred{};
  holder_tid = 0;
  pi_nwaiters.store(0, std::memory_order_relaxed);
}

void pi_fork_child_self(pid_t ptid) {
  Foreign* t = stash;
  int cap = stash_cap;
  stash = nullptr;
  stash_cap = 0;
  if (!t) return;
  for (int i = 0; i < cap; i++) {
    const Foreign& f = t[i];
    if (f.tid != ptid || !f.have_own) continue;
    // The parent's thread was (or was being) raised: this thread has its
    // own scheduling, as a child gets it from the kernel (which never
    // passes a priority inheritance boost on): SCHED_RESET_ON_FORK gives
    // a real-time policy back as SCHED_OTHER, and is not inherited.
    KSched k = f.own;
    if (k.pol & SCHED_RESET_ON_FORK) {
      k.pol &= ~SCHED_RESET_ON_FORK;
      if (rt_policy(k.pol)) {
        k.pol = SCHED_OTHER;
        k.sp.sched_priority = 0;
      }
    }
    sys::sched_setscheduler(0, k.pol, &k.sp);
    break;
  }
  if (t != foreign_stash_first) sys::munmap(t, (size_t)cap * sizeof(Foreign));
}

bool pi_own_sched(pid_t tid, int* pol, struct sched_param* sp) {
  if (__builtin_expect(__atomic_load_n(&nforeign, __ATOMIC_RELAXED) == 0, 1)) return false;
  PiGuard guard;
  int i = foreign_find(tid, false);
  if (i < 0 || !foreign[i].have_own || foreign[i].applied == 0) return false;
  *pol = foreign[i].own.pol;
  *sp = foreign[i].own.sp;
  return true;
}

namespace {
__attribute__((constructor(103))) void pi_ctor() { register_fork_child_hook(pi_after_fork); }
}  // namespace

void pi_wait_begin(PiWaiter* w, const int* word, bool shared) {
  G* g = tls_g;
  w->word = word;
  w->shared = shared;
  w->g = (g && !g->is_g0()) ? g : nullptr;
  w->base = rt_wait_prio();
  w->ktid = w->g ? 0 : (pid_t)sys::gettid();
  PiGuard guard;
  w->next = waiters;
  waiters = w;
  w->linked = true;
  if (w->g)
    w->g->pi_wait = w;
  else
    foreign_pi_wait = w;
  pi_nwaiters.fetch_add(1, std::memory_order_release);
  if (w->base > 0) nrt++;
  // Without a real-time waiter nobody inherits anything.
  if (nrt > 0) recompute_locked();
}

bool pi_wait_timed(const PiWaiter* w) {
  return w->base > 0 || (w->g && w->g->pi_boost.load(std::memory_order_relaxed) > 0);
}

void pi_recompute_now(const PiWaiter* w) {
  int no = __atomic_load_n(&w->notours, __ATOMIC_RELAXED);
  if (no && (__atomic_load_n(w->word, __ATOMIC_ACQUIRE) & kTidMask) == no) return;
  PiGuard guard;
  if (nrt > 0 || boosted || nraised > 0 || nforeign > 0) recompute_locked();
}

bool pi_unlocked_slow(bool yielding) {
  G* g = tls_g;
  // An M:N goroutine with a P gives its M to the woken owner; a bound G
  // or a foreign thread has no run queue to give.
  G* self = yielding && g && !g->is_g0() && !g->rt_locked && g->m && g->m->p ? g : nullptr;
  PiGuard guard;
  if (nrt == 0 && !boosted && nraised == 0 && nforeign == 0) return false;
  return recompute_locked(self) > 0 && self;
}

void pi_wait_end(PiWaiter* w) {
  if (!w->linked) return;
  PiGuard guard;
  for (PiWaiter** pw = &waiters; *pw; pw = &(*pw)->next) {
    if (*pw == w) {
      *pw = w->next;
      break;
    }
  }
  w->linked = false;
  if (w->g)
    w->g->pi_wait = nullptr;
  else
    foreign_pi_wait = nullptr;
  pi_nwaiters.fetch_sub(1, std::memory_order_release);
  if (w->base > 0) nrt--;
  if (nrt > 0 || boosted || nraised > 0 || nforeign > 0) recompute_locked();
}

bool pi_foreign_waiting() { return foreign_pi_wait != nullptr; }

void pi_wait_drop_self() {
  G* g = tls_g;
  PiWaiter* w = (g && !g->is_g0()) ? g->pi_wait : foreign_pi_wait;
  if (w) pi_wait_end(w);
}

long pi_m_set_own(M* mp, int pol, int prio) {
  struct sched_param sp = {};
  sp.sched_priority = prio;
  pol &= ~SCHED_RESET_ON_FORK;
  // Under pi_lock, unlike m_apply's lowering of the holder's own thread
  // (Deferred): a real-time thread that preempts this one as it lowers
  // itself and waits for pi_lock raises it again through the PI futex.
  // Rare (a real-time G's start, exit, or change of policy).
  PiGuard guard;
  long r;
  if (rt_policy(pol)) {
    r = sys::sched_setscheduler(0, pol | SCHED_RESET_ON_FORK, &sp);
  } else {
    // Without the privilege, clearing SCHED_RESET_ON_FORK is refused.
    r = sys::sched_setscheduler(0, pol, &sp);
    if (r < 0) r = sys::sched_setscheduler(0, pol | SCHED_RESET_ON_FORK, &sp);
  }
  if (r < 0) return r;
  if (mp->pi_prio.load(std::memory_order_relaxed) != 0) nraised--;
  mp->pi_prio.store(0, std::memory_order_relaxed);
  return 0;
}

void pi_sched_in_slow(M* mp, G* gp) {
  PiGuard guard;
  int want = gp ? gp->pi_boost.load(std::memory_order_relaxed) : 0;
  if (mp->pi_prio.load(std::memory_order_relaxed) != want) m_apply(mp, gp, want);
}

}  // namespace goshim

