// epoll backend of the netpoller (contract in netpoll.hpp).
#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>

#include "core/fdtable.hpp"
#include "core/netpoll.hpp"
#include "core/ownfd.hpp"
#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "core/trace.hpp"
#include "syscalls/sys.hpp"

#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441
#endif

namespace goshim {

// Called for every epoll event that is not the break fd (fdtable.cpp).
// Weak so that the core links without the fd layer (unit tests).
__attribute__((weak)) void netpoll_ready_event(void* data, uint32_t events, GQueue& q) {
  (void)data;
  (void)events;
  (void)q;
}

namespace {

// goshim's own fds (core/ownfd.hpp): the program may take their numbers,
// and then they move. Load them anew for each use.
std::atomic<int> epfd_{-1};
std::atomic<int> breakfd_{-1};
inline int epfd() { return epfd_.load(std::memory_order_relaxed); }
inline int breakfd() { return breakfd_.load(std::memory_order_relaxed); }
std::atomic<uint32_t> wake_sig{0};  // 1 while a break is pending
std::atomic<int32_t> nwaiters{0};
bool have_pwait2 = true;
char break_marker;  // its address tags the break fd's epoll events

}  // namespace

void netpoll_init() {
  long fd = sys::epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) fatal("netpoll: epoll_create1 failed");
  long bfd = sys::eventfd2(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (bfd < 0) fatal("netpoll: eventfd failed");
  epfd_.store(ownfd_place((int)fd), std::memory_order_relaxed);
  breakfd_.store(ownfd_place((int)bfd), std::memory_order_relaxed);
  ownfd_add(&epfd_);
  ownfd_add(&breakfd_);
  struct epoll_event ev;
  ev.events = EPOLLIN;
  ev.data.ptr = &break_marker;
  if (sys::epoll_ctl(epfd(), EPOLL_CTL_ADD, breakfd(), &ev) < 0) fatal("netpoll: epoll_ctl failed");
  // epoll_pwait2 (Linux 5.11+) takes a nanosecond timeout; sleeps shorter
  // than a millisecond need it.
  struct timespec zero = {0, 0};
  struct epoll_event dummy;
  long r = sys::raw6(SYS_epoll_pwait2, epfd(), (long)&dummy, 1, (long)&zero, 0, 8);
  have_pwait2 = r != -ENOSYS;
  netpoll_generic_init();
}

long netpoll_register(int fd, uint64_t tag) {
  struct epoll_event ev;
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
  ev.data.u64 = tag;
  for (;;) {
    int ep = epfd();
    long r = sys::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    if (r >= 0 || ep == epfd()) return r;  // else moved meanwhile (ownfd_vacate): again
  }
}

long netpoll_unregister(int fd) {
  struct epoll_event ev = {};
  for (;;) {
    int ep = epfd();
    long r = sys::epoll_ctl(ep, EPOLL_CTL_DEL, fd, &ev);
    if (r >= 0 || ep == epfd()) return r;
  }
}

// Fork child hook (core/fork.cpp), after the scheduler was reset: a new
// instance (the inherited one is shared with the parent and must not be
// touched), zero waiters, and the fd table's registrations forgotten.
void netpoll_after_fork() {
  if (epfd() >= 0) sys::close(epfd());
  if (breakfd() >= 0) sys::close(breakfd());
  epfd_.store(-1, std::memory_order_relaxed);
  breakfd_.store(-1, std::memory_order_relaxed);
  wake_sig.store(0, std::memory_order_relaxed);
  nwaiters.store(0, std::memory_order_relaxed);
  for (M* mp = sched.allm; mp; mp = mp->alllink) mp->npwait.store(0, std::memory_order_relaxed);
  netpoll_init();
  fd_fork_child();
}

bool netpoll_inited() { return epfd() >= 0; }
int netpoll_epfd() { return epfd(); }

// Waiter counts live on the Ms (M::npwait) where the change happens, and
// in nwaiters for threads that are not Ms: no contended line, no locked
// instruction on the I/O path. Ms are never freed and allm only grows (a
// racy walk sees a consistent list), so the sum is exact up to the
// in-flight changes, as with one counter.
bool netpoll_any_waiters() {
  int32_t n = nwaiters.load(std::memory_order_relaxed);
  for (M* mp = __atomic_load_n(&sched.allm, __ATOMIC_ACQUIRE); mp; mp = mp->alllink)
    n += mp->npwait.load(std::memory_order_relaxed);
  return n > 0;
}

void netpoll_adjust_waiters(int32_t delta) { netpoll_adjust_waiters_on(nullptr, delta); }

void netpoll_adjust_waiters_on(M* m, int32_t delta) {
  if (!m) {
    G* g = getg();
    m = g ? g->m : nullptr;
  }
  if (m) {
    m->npwait.store(m->npwait.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  } else {
    nwaiters.fetch_add(delta, std::memory_order_relaxed);
  }
}

void netpoll_break() {
  uint32_t zero = 0;
  if (!wake_sig.compare_exchange_strong(zero, 1, std::memory_order_acq_rel)) return;
  uint64_t one = 1;
  for (;;) {
    long r = sys::write(breakfd(), &one, sizeof one);
    if (r == -EINTR) continue;
    return;  // EAGAIN: the counter is already non-zero, a wakeup is pending
  }
}

void netpoll(int64_t delay_ns, GQueue& q) {
  int ep = epfd();
  if (ep < 0) return;
  struct epoll_event events[128];
  long n;
retry:
  if (have_pwait2) {
    struct timespec ts, *tsp = nullptr;
    if (delay_ns >= 0) {
      ts.tv_sec = delay_ns / 1000000000;
      ts.tv_nsec = delay_ns % 1000000000;
      tsp = &ts;
    }
    n = sys::raw6(SYS_epoll_pwait2, ep, (long)events, 128, (long)tsp, 0, 8);
  } else {
    int ms = -1;
    if (delay_ns == 0)
      ms = 0;
    else if (delay_ns > 0)
      ms = delay_ns >= 1000000000LL * 1000000 ? 1000000000 : (int)((delay_ns + 999999) / 1000000);
    n = sys::epoll_wait(ep, events, 128, ms);
  }
  if (n < 0) {
    if (n != -EINTR) fatalf("netpoll: epoll_wait failed: %ld", -n);
    // A signal: if we were to block for a while, return and let the
    // scheduler recompute its deadline.
    if (delay_ns > 0) return;
    goto retry;
  }
  for (long i = 0; i < n; i++) {
    if (events[i].data.ptr == &break_marker) {
      uint64_t v;
      sys::read(breakfd(), &v, sizeof v);
      wake_sig.store(0, std::memory_order_release);
      continue;
    }
    netpoll_ready_event(events[i].data.ptr, events[i].events, q);
  }
  // The trace's "ready" events for Gs woken by the network (ready() emits
  // the others): a G's wait from here to its next slice is queueing delay.
  if (__builtin_expect(trace_on, 0))
    for (G* gp = q.head; gp; gp = gp->schedlink) trace_ev(TraceEv::GReady, gp, gp->goid);
}

}  // namespace goshim
