// Per-goroutine CPU time (see cputime.hpp).
#include "core/cputime.hpp"
#include "core/scstore.hpp"

#include <time.h>

#include "syscalls/sys.hpp"

namespace goshim {

std::atomic<bool> cputime_on{false};

namespace {

// The calling kernel thread's CPU time, ns.
int64_t self_cpu() {
  struct timespec ts;
  if (sys::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// mp's kernel thread's CPU time, ns, or -1.
int64_t m_cpu(M* mp) {
  if (!mp || mp->tid <= 0) return -1;
  clockid_t clk = (clockid_t)((~(unsigned)mp->tid << 3) | 6);  // per-thread CPUCLOCK_SCHED
  struct timespec ts;
  if (sys::clock_gettime(clk, &ts) != 0) return -1;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void stop(G* gp, int64_t now) {
  int64_t mark = gp->cpu_mark.load(std::memory_order_relaxed);
  if (mark >= 0 && now > mark) gp->cpu_ns.fetch_add(now - mark, std::memory_order_seq_cst);
  sc_store(gp->cpu_mark, -1);
}

}  // namespace

void cputime_in_slow(G* gp) { sc_store(gp->cpu_mark, self_cpu()); }

void cputime_out_slow(G* gp) { stop(gp, self_cpu()); }

void cputime_enable(G* self) {
  if (!cputime_on.load(std::memory_order_acquire)) sc_store(cputime_on, true);
  if (self && self->cpu_mark.load(std::memory_order_relaxed) < 0)
    sc_store(self->cpu_mark, self_cpu());
}

int64_t g_cputime(G* gp, G* self) {
  cputime_enable(self);
  if (gp == self) {
    // Running here: nothing else changes its record meanwhile.
    int64_t mark = gp->cpu_mark.load(std::memory_order_relaxed);
    int64_t now = self_cpu();
    return gp->cpu_ns.load(std::memory_order_relaxed) + (mark >= 0 && now > mark ? now - mark : 0);
  }
  for (int tries = 0; tries < 100; tries++) {
    GStatus st = gp->status.load(std::memory_order_seq_cst);
    if (st == GStatus::Idle || gp->magic != kGMagic) return -1;
    int64_t acc = gp->cpu_ns.load(std::memory_order_seq_cst);
    int64_t mark = gp->cpu_mark.load(std::memory_order_seq_cst);
    if (mark < 0) {
      if (gp->cpu_ns.load(std::memory_order_seq_cst) == acc) return acc;
      continue;
    }
    // Running on an M: add the M's clock advance since the G started there.
    M* mp = gp->m;
    int64_t now = m_cpu(mp);
    if (gp->cpu_mark.load(std::memory_order_seq_cst) != mark ||
        gp->cpu_ns.load(std::memory_order_seq_cst) != acc || gp->m != mp)
      continue;  // it switched meanwhile
    return acc + (now > mark ? now - mark : 0);
  }
  return gp->cpu_ns.load(std::memory_order_seq_cst);
}

void cputime_reset(G* gp, bool running) {
  gp->cpu_ns.store(0, std::memory_order_relaxed);
  sc_store(gp->cpu_mark, running && cputime_on.load(std::memory_order_relaxed) ? self_cpu() : -1);
}

}  // namespace goshim
