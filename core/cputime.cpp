// Per-goroutine CPU time (see cputime.hpp).
#include "core/cputime.hpp"
#include "core/scstore.hpp"

#include <sys/resource.h>
#include <time.h>

#include "syscalls/sys.hpp"

namespace goshim {

namespace {

constexpr int64_t kCloseNs = 1000000;     // a window closes at a switch after ~1 ms
constexpr int64_t kLongBlockNs = 20000;   // a blocking call this long was off CPU
constexpr uint64_t kNsMask = (1ULL << 56) - 1;

// Ticks -> ns calibration (CLOCK_MONOTONIC against the counter since the
// first window closed); 0 until 20 ms have passed. ns per tick << 32.
std::atomic<uint64_t> ns_per_tick_q32{0};
std::atomic<uint64_t> cal_ticks{0};
std::atomic<int64_t> cal_ns{0};

// The calling kernel thread's CPU time, ns.
int64_t self_cpu() {
  struct timespec ts;
  if (sys::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// The calling kernel thread's CPU time as the scheduler last brought it up
// to date (its last switch, wakeup on its CPU, or tick), ns:
// getrusage(RUSAGE_THREAD)'s user + system time, which the kernel scales to
// that total (microseconds). Read at the windows that close on their own
// at a switch (age, a 17th G): unlike reading the thread's CPU
// clock (self_cpu), it does not update the scheduler's account of the
// running thread, which on Linux 6.6+ (EEVDF) also ends the thread's time
// slice there when it is used up. A clock read every window (~1 ms) made
// the kernel switch a busy M out for another runnable thread (an idle M
// just woken to look for work, another process) at the read instead of at
// its next tick: at GOSHIM_MAXPROCS=2 under load, ~100 more context
// switches in a 50 ms ping-pong and its best 3 ms 20 % slower. Behind the
// thread's CPU clock by at most a tick; the windows stay conserved
// (start_cpu never goes back, close_at).
int64_t self_cpu_lazy() {
  struct rusage ru;
  if (sys::getrusage_thread(&ru) != 0) return 0;
  return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
         ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

void calibrate(CpuWindow& w, uint64_t now) {
#if defined(__aarch64__)
  (void)now;
  uint64_t f;  // the counter's frequency, Hz
  asm volatile("mrs %0, cntfrq_el0" : "=r"(f));
  if (f && !ns_per_tick_q32.load(std::memory_order_relaxed))
    ns_per_tick_q32.store((uint64_t)((1000000000ULL << 32) / f), std::memory_order_relaxed);
  if (f) w.close_ticks = (uint64_t)((unsigned __int128)f * kCloseNs / 1000000000);
#else
  int64_t ns = sys::nanotime();
  uint64_t t0 = cal_ticks.load(std::memory_order_acquire);
  if (t0 == 0) {
    // The first window closed anywhere: the starting point (any one wins).
    cal_ns.store(ns, std::memory_order_relaxed);
    cal_ticks.store(now, std::memory_order_release);
    return;
  }
  int64_t dns = ns - cal_ns.load(std::memory_order_relaxed);
  int64_t dt = (int64_t)(now - t0);
  if (dns < 20000000 || dt <= 0) return;
  uint64_t q = (uint64_t)(((unsigned __int128)dns << 32) / (uint64_t)dt);
  ns_per_tick_q32.store(q, std::memory_order_relaxed);
  if (q) w.close_ticks = (uint64_t)(((unsigned __int128)kCloseNs << 32) / q);
#endif
}

// Adds ns to gp's settled time if gp is still the incarnation tag ran.
void settle(G* gp, uint8_t tag, uint64_t ns) {
  if (!gp || ns == 0) return;
  uint64_t w = gp->cpu_word.load(std::memory_order_relaxed);
  do {
    if ((uint8_t)(w >> 56) != tag) return;
  } while (!gp->cpu_word.compare_exchange_weak(w, (w & ~kNsMask) | ((w + ns) & kNsMask),
                                               std::memory_order_acq_rel,
                                               std::memory_order_relaxed));
}

uint8_t tag_of(G* gp) { return (uint8_t)(gp->cpu_word.load(std::memory_order_relaxed) >> 56); }

// Closes mp's window with the kernel thread's CPU clock at cpu (ns) and
// ticks now: the window's CPU to its entries by their ticks, then extra_ns
// more to extra_g (a blocking call's own CPU); opens the next one.
void close_at(M* mp, uint64_t now, int64_t cpu, int64_t window_ns, G* extra_g, uint64_t extra_ns) {
  CpuWindow& w = mp->cw;
  if (window_ns < 0) window_ns = 0;
  if (w.total > 0) {
    for (uint32_t i = 0; i < w.n; i++) {
      CpuEntry& e = w.ent[i];
      settle(e.g, e.tag, (uint64_t)((unsigned __int128)window_ns * e.ticks / w.total));
    }
    __atomic_store_n(&w.rate_q32, (uint64_t)(((unsigned __int128)window_ns << 32) / w.total),
                     __ATOMIC_RELAXED);
  }
  if (extra_g) settle(extra_g, tag_of(extra_g), extra_ns);
  w.n = 0;
  w.total = 0;
  __atomic_store_n(&w.gen, w.gen + 1, __ATOMIC_RELAXED);
  // An exact reading (self_cpu) may be ahead of a later lazy one
  // (self_cpu_lazy): the next window starts at the larger, so no CPU time
  // is handed out twice.
  if (cpu > w.start_cpu) w.start_cpu = cpu;
  w.opened = now;
  calibrate(w, now);
}

// The split of a blocking call (see cputime.hpp): the window up to the
// call's start gets its ticks at the last rate, capped by the window's CPU;
// the call's G the rest. On the M; cpu is its CPU clock now.
void close_block(M* mp, G* gp, uint64_t now, int64_t cpu) {
  CpuWindow& w = mp->cw;
  int64_t d = cpu - w.start_cpu;
  if (d < 0) d = 0;
  uint64_t rate = w.rate_q32 ? w.rate_q32 : ns_per_tick_q32.load(std::memory_order_relaxed);
  int64_t pre;
  if (rate) {
    unsigned __int128 p = ((unsigned __int128)w.total * rate) >> 32;
    pre = p < (unsigned __int128)d ? (int64_t)p : d;
  } else {
    // Not calibrated yet: by ticks, the call's counted as run time.
    uint64_t call = now - w.block_at;
    pre = (int64_t)((unsigned __int128)d * w.total / (w.total + call ? w.total + call : 1));
  }
  close_at(mp, now, cpu, pre, gp, (uint64_t)(d - pre));
}

}  // namespace

void cputime_close(M* mp, uint64_t now) {
  int64_t cpu = self_cpu_lazy();
  close_at(mp, now, cpu, cpu - mp->cw.start_cpu, nullptr, 0);
}

void cputime_close_exact(M* mp, uint64_t now) {
  int64_t cpu = self_cpu();
  close_at(mp, now, cpu, cpu - mp->cw.start_cpu, nullptr, 0);
}

// gp's first run in mp's window: a new entry with t ticks (a full window
// closes first: t goes to the next one).
static void add_entry(M* mp, G* gp, uint64_t t, uint64_t now) {
  CpuWindow& w = mp->cw;
  if (w.n == CpuWindow::kEntries) cputime_close(mp, now);
  uint32_t i = w.n;
  w.ent[i] = CpuEntry{gp, t, tag_of(gp)};
  __atomic_store_n(&w.n, i + 1, __ATOMIC_RELEASE);
  w.total += t;
  gp->cpu_win_m = mp;
  gp->cpu_win_gen = w.gen;
  gp->cpu_win_idx = (uint8_t)i;
}

void cputime_add_entry(M* mp, G* gp, uint64_t t, uint64_t now) {
  add_entry(mp, gp, t, now);
  if (now - mp->cw.opened >= mp->cw.close_ticks) cputime_close(mp, now);
}

void cputime_m_start(M* mp) {
  CpuWindow& w = mp->cw;
  w.n = 0;
  w.total = 0;
  w.start_cpu = 0;  // a thread's clock starts at 0: its start-up so far is in this window
  w.block_at = 0;
  w.last = w.opened = cputicks();
}

void cputime_m_exit(M* mp) {
  if (mp->cw.n) cputime_close_exact(mp, cputicks());  // the thread ends: no slice to end early
}

void cputime_block_enter(G* gp) {
  M* mp = gp->m;
  uint64_t now = cputicks();
  cputime_out(gp, mp, now);  // the run so far (may close the window)
  mp->cw.block_at = now;
}

void cputime_block_exit(G* gp) {
  M* mp = gp->m;
  CpuWindow& w = mp->cw;
  uint64_t now = cputicks(), at = w.block_at;
  w.block_at = 0;
  if (!at) return;
  uint64_t q = ns_per_tick_q32.load(std::memory_order_relaxed);
  uint64_t long_ticks = q ? (uint64_t)(((unsigned __int128)kLongBlockNs << 32) / q) : 60000;
  if (now - at < long_ticks) return;  // short: counted as run time from at (w.last)
  w.block_at = at;
  close_block(mp, gp, now, self_cpu());
  w.block_at = 0;
  w.last = now;
}

int64_t g_cputime(G* gp, G* self) {
  if (gp == self && gp->m) {
    // The G itself, running on its M: fold its run so far and close the
    // window (the read's system call); everything this M owes it is settled.
    M* mp = acquirem();
    CpuWindow& w = mp->cw;
    uint64_t now = cputicks();
    if (w.block_at) {
      // Inside a blocking call (a handler of a signal that interrupted it):
      // the call so far as at its exit, the rest of it from now.
      close_block(mp, gp, now, self_cpu());
      w.block_at = now;
      w.last = now;
    } else {
      // Its run so far into the window (as cputime_out, without closing it
      // at its age: the close below reads the clock exactly, this read's
      // system call).
      int64_t d = (int64_t)(now - w.last);
      uint64_t t = d > 0 && w.last ? (uint64_t)d : 0;
      w.last = now;
      if (gp->cpu_win_m == mp && gp->cpu_win_gen == w.gen) {
        w.ent[gp->cpu_win_idx].ticks += t;
        w.total += t;
      } else {
        add_entry(mp, gp, t, now);
      }
      int64_t cpu = self_cpu();
      close_at(mp, now, cpu, cpu - w.start_cpu, nullptr, 0);
    }
    releasem(mp);
    int64_t v = (int64_t)(gp->cpu_word.load(std::memory_order_acquire) & kNsMask);
    int64_t seen = gp->cpu_seen.load(std::memory_order_relaxed);
    while (v > seen && !gp->cpu_seen.compare_exchange_weak(seen, v, std::memory_order_relaxed)) {
    }
    return v > seen ? v : seen;
  }
  GStatus st = gp->status.load(std::memory_order_seq_cst);
  if (st == GStatus::Idle || gp->magic != kGMagic) return -1;
  int64_t v = (int64_t)(gp->cpu_word.load(std::memory_order_acquire) & kNsMask);
  // Its latest window, if still open: its ticks there, and its current run
  // if it is running (not in a blocking call), at that M's last rate.
  M* wm = __atomic_load_n(&gp->cpu_win_m, __ATOMIC_RELAXED);
  if (wm) {
    CpuWindow& w = wm->cw;
    uint32_t gen = __atomic_load_n(&gp->cpu_win_gen, __ATOMIC_RELAXED);
    uint32_t idx = __atomic_load_n(&gp->cpu_win_idx, __ATOMIC_RELAXED);
    uint64_t ticks = 0;
    if (__atomic_load_n(&w.gen, __ATOMIC_RELAXED) == gen && idx < CpuWindow::kEntries &&
        __atomic_load_n(&w.ent[idx].g, __ATOMIC_RELAXED) == gp)
      ticks = __atomic_load_n(&w.ent[idx].ticks, __ATOMIC_RELAXED);
    if (st == GStatus::Running && __atomic_load_n(&gp->m, __ATOMIC_RELAXED) == wm) {
      uint64_t last = __atomic_load_n(&w.last, __ATOMIC_RELAXED);
      int64_t run = (int64_t)(cputicks() - last);
      if (last && run > 0) ticks += (uint64_t)run;
    }
    uint64_t rate = __atomic_load_n(&w.rate_q32, __ATOMIC_RELAXED);
    if (!rate) rate = ns_per_tick_q32.load(std::memory_order_relaxed);
    v += (int64_t)((ticks * (unsigned __int128)rate) >> 32);
  }
  int64_t seen = gp->cpu_seen.load(std::memory_order_relaxed);
  while (v > seen && !gp->cpu_seen.compare_exchange_weak(seen, v, std::memory_order_relaxed)) {
  }
  return v > seen ? v : seen;
}

void cputime_reset(G* gp) {
  uint8_t tag = (uint8_t)(tag_of(gp) + 1);
  sc_store(gp->cpu_word, (uint64_t)tag << 56);
  gp->cpu_seen.store(0, std::memory_order_relaxed);
  gp->cpu_win_m = nullptr;
}

void cputime_after_fork(G* gp, M* mp) {
  cputime_reset(gp);
  cputime_m_start(mp);
  __atomic_store_n(&mp->cw.gen, mp->cw.gen + 1, __ATOMIC_RELAXED);
}

}  // namespace goshim
