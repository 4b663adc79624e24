// Waits on many fds at once: the core of poll, ppoll, select, pselect and
// epoll_wait on a program's own epoll instance (see netpoll.hpp).
//
// Like the kernel's poll, the wait registers one record per (fd, side) on
// each descriptor, parks once, and on any wake-up unregisters them all and
// asks the kernel again with a zero timeout. The readiness answer always
// comes from the kernel (the real call with a zero timeout); netpoll only
// says when asking again is worthwhile.
#include "core/pollwait.hpp"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#include "core/fdtable.hpp"
#include "core/netpoll.hpp"
#include "core/sched.hpp"
#include "core/signal.hpp"
#include "core/timer.hpp"
#include "syscalls/sys.hpp"
#include "syscalls/sys_io.hpp"

namespace goshim {

namespace {

constexpr int kStackFds = 8;

struct Rec {
  PollWaiter w;
  uint32_t snap;
};

}  // namespace

long netpoll_wait_fds(const FdInterest* v, int n, int64_t deadline, long (*check)(void* ctx),
                      void* ctx, WaitReason why, const sigset_t* sigmask, bool* restart) {
  G* gp = getg();
  share_slice_check();
  Rec stack_recs[2 * kStackFds];
  PollDesc* stack_pds[kStackFds];
  Rec* recs = stack_recs;
  PollDesc** pds = stack_pds;
  void* heap = nullptr;
  if (n > kStackFds) {
    // On a user G, no runtime lock held: malloc is allowed here.
    heap = malloc((size_t)n * (2 * sizeof(Rec) + sizeof(PollDesc*)));
    if (!heap) return -ENOMEM;
    recs = (Rec*)heap;
    pds = (PollDesc**)(recs + 2 * n);
    for (int i = 0; i < 2 * n; i++) new (&recs[i]) Rec();
  }
  // Descriptors, registered up front so that no edge after the first check
  // can be missed (none for a call that does not wait).
  int nrec = 0;
  for (int i = 0; i < n; i++) {
    pds[i] = nullptr;
    if (v[i].fd < 0 || !v[i].modes || deadline < 0) continue;
    int err;
    PollDesc* pd = fd_get(v[i].fd, &err);
    if (!pd) continue;  // the check reports it (POLLNVAL, EBADF)
    {
      PdGuard g(pd->lock);
      if (pd_register_locked(pd) < 0) {
        // Not pollable (a regular file): always ready, the check says so.
      }
    }
    pds[i] = pd;
    for (uint8_t m = kModeRead; m <= kModeWrite; m <<= 1) {
      if (!(v[i].modes & m)) continue;
      PollWaiter* w = &recs[nrec++].w;
      w->pd = pd;
      w->mode = m;
      w->gp = gp;
      w->buf = nullptr;
    }
  }

  long result = 0;
  uint32_t h0 = gp->nhandled;
  // The call's signal mask (ppoll, pselect, epoll_pwait), set through the
  // signal layer, which delivers what a change unblocks.
  bool masked = false;
  sigset_t oldmask;
  for (;;) {
    for (int k = 0; k < nrec; k++) recs[k].snap = pd_events(recs[k].w.pd, recs[k].w.mode);
    long c = check(ctx);
    if (c == -EINTR && gp->nhandled == h0) {
      // The zero-timeout ppoll/pselect of the check returns EINTR when a
      // signal is pending as it runs (the kernel checks before seeing the
      // timeout expired): one goshim takes itself (preemption, a signal
      // being routed), not a program handler, which would show in nhandled.
      continue;
    }
    if (c != 0) {
      result = c;
      break;
    }
    if (sigmask && !masked) {
      // As the kernel's ppoll/pselect/epoll_pwait: a descriptor found
      // ready is the answer (the signals the mask opens stay pending);
      // else a handler that runs as the mask is set (a pending signal it
      // unblocks) ends the call with EINTR, also at a zero timeout.
      signal_setmask(gp, SIG_SETMASK, sigmask, &oldmask);
      masked = true;
      if (gp->nhandled != h0) {
        result = -EINTR;
        break;
      }
    }
    if (deadline < 0 || (deadline > 0 && sys::nanotime() >= deadline)) {
      result = 0;
      break;
    }
    uint64_t seq = gwait_arm(gp, WaitKind::Netpoll, true);
    bool changed = false;
    for (int k = 0; k < nrec && !changed; k++) {
      PollWaiter* w = &recs[k].w;
      PollDesc* pd = w->pd;
      w->seq = seq;
      PdGuard g(pd->lock);
      if (pd_events(pd, w->mode) != recs[k].snap)
        changed = true;
      else
        pd_enqueue_locked(pd, w);
    }
    WakeReason r;
    if (changed || gp->nhandled != h0) {
      // An event since the check, or a handler ran on the G meanwhile (a
      // signal that came before it could park: EINTR, as the kernel's).
      r = gwait_disarm(gp);
      if (r == WakeReason::None && !changed) r = WakeReason::Handled;
    } else {
      if (deadline > 0) gwait_arm_timer(gp, seq, deadline);
      r = gwait_park(gp, why, nullptr);
      if (deadline > 0) timer_del(&gp->timer);
    }
    for (int k = 0; k < nrec; k++) pd_unlink(&recs[k].w);
    if (r == WakeReason::Intr && signal_interrupt_lost(gp, h0)) continue;  // (as fdio's interrupt_lost)
    if (r == WakeReason::Intr || r == WakeReason::Handled) {
      result = -EINTR;
      break;
    }
    if (r == WakeReason::Timeout) {
      result = check(ctx);
      break;
    }
  }
  if (result == -EINTR) {
    // Consumes the interruption record (also after the check's EINTR,
    // which follows a handler on this G).
    bool rs = signal_restart_since(gp, h0);
    if (restart) *restart = rs;
  }
  // The mask back (what it unblocks is delivered: on the way out, as the
  // kernel's; the result stands).
  if (masked) signal_setmask(gp, SIG_SETMASK, &oldmask, nullptr);
  for (int i = 0; i < n; i++)
    if (pds[i]) pd_put(pds[i]);
  if (heap) {
    for (int i = 0; i < 2 * n; i++) recs[i].~Rec();
    free(heap);
  }
  return result;
}

}  // namespace goshim

// ---- poll, select, epoll_wait ----------------------------------------------------------------

namespace goshim {

namespace {

struct PollCtx {
  struct pollfd* fds;
  nfds_t n;
};

long poll_check(void* ctx) {
  PollCtx* c = (PollCtx*)ctx;
  struct timespec zero = {0, 0};
  return sys::ppoll(c->fds, c->n, &zero, nullptr);
}

constexpr int kStackInterest = 16;

}  // namespace

int64_t deadline_after_ms(int ms) {
  if (ms < 0) return 0;
  return sys::nanotime() + (int64_t)ms * 1000000;
}

int64_t deadline_after_ts(const struct timespec* ts) {
  if (!ts) return 0;
  int64_t now = sys::nanotime();
  if (ts->tv_sec > (INT64_MAX / 2 - now) / 1000000000) return INT64_MAX / 2;
  return now + (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

static long poll_fds_inner(struct pollfd* fds, nfds_t n, int64_t deadline,
                           const sigset_t* sigmask) {
  PollCtx ctx = {fds, n};
  if (n > (nfds_t)(1 << 20)) return poll_check(&ctx);  // the kernel's EINVAL
  FdInterest stack_v[kStackInterest] = {};
  FdInterest* v = stack_v;
  if (n > kStackInterest) {
    v = (FdInterest*)malloc(sizeof(FdInterest) * n);
    if (!v) return -ENOMEM;
  }
  for (nfds_t i = 0; i < n; i++) {
    short e = fds[i].events;
    uint8_t m = kModeRead;  // POLLHUP/POLLERR are always reported: read side events
    if (e & (POLLOUT | POLLWRNORM | POLLWRBAND)) m |= kModeWrite;
    if (!(e & (POLLIN | POLLRDNORM | POLLRDBAND | POLLPRI | POLLRDHUP)) && (m & kModeWrite))
      m = kModeRead | kModeWrite;
    v[i] = {fds[i].fd, m};
  }
  long r = netpoll_wait_fds(v, (int)n, deadline, poll_check, &ctx, WaitReason::Poll, sigmask);
  if (v != stack_v) free(v);
  return r;
}

namespace {

struct SelCtx {
  int n;
  size_t bytes;
  fd_set *r, *w, *e;          // the program's sets (results go there)
  unsigned long *ir, *iw, *ie;  // the sets as asked
  unsigned long *orr, *ow, *oe;  // scratch for the zero-timeout select
};

long select_check(void* ctx) {
  SelCtx* c = (SelCtx*)ctx;
  if (c->r) memcpy(c->orr, c->ir, c->bytes);
  if (c->w) memcpy(c->ow, c->iw, c->bytes);
  if (c->e) memcpy(c->oe, c->ie, c->bytes);
  struct timespec zero = {0, 0};
  long k = sys::pselect6(c->n, c->r ? c->orr : nullptr, c->w ? c->ow : nullptr,
                         c->e ? c->oe : nullptr, &zero, nullptr);
  return k;
}

bool bit(const unsigned long* s, int fd) {
  return s[fd / (8 * sizeof(long))] & (1ul << (fd % (8 * sizeof(long))));
}

}  // namespace

static long select_fds_inner(int n, fd_set* r, fd_set* w, fd_set* e, int64_t deadline,
                             const sigset_t* sigmask) {
  if (n < 0) return -EINVAL;
  size_t words = ((size_t)n + 8 * sizeof(long) - 1) / (8 * sizeof(long));
  if (words == 0) words = 1;
  size_t bytes = words * sizeof(long);
  unsigned long stack_buf[6 * (FD_SETSIZE / (8 * sizeof(long)))];
  unsigned long* buf = stack_buf;
  if (bytes * 6 > sizeof stack_buf) {
    buf = (unsigned long*)malloc(bytes * 6);
    if (!buf) return -ENOMEM;
  }
  memset(buf, 0, bytes * 6);
  SelCtx c = {n, bytes, r, w, e, buf, buf + words, buf + 2 * words,
              buf + 3 * words, buf + 4 * words, buf + 5 * words};
  size_t nbytes = ((size_t)n + 7) / 8;  // the program's sets may be just that long
  if (r) memcpy(c.ir, r, nbytes);
  if (w) memcpy(c.iw, w, nbytes);
  if (e) memcpy(c.ie, e, nbytes);
  // The fds to watch.
  int cnt = 0;
  for (int fd = 0; fd < n; fd++)
    if ((r && bit(c.ir, fd)) || (w && bit(c.iw, fd)) || (e && bit(c.ie, fd))) cnt++;
  FdInterest stack_v[kStackInterest];
  FdInterest* v = stack_v;
  if (cnt > kStackInterest) v = (FdInterest*)malloc(sizeof(FdInterest) * cnt);
  long res;
  if (!v) {
    res = -ENOMEM;
  } else {
    int k = 0;
    for (int fd = 0; fd < n; fd++) {
      uint8_t m = 0;
      if ((r && bit(c.ir, fd)) || (e && bit(c.ie, fd))) m |= kModeRead;
      if (w && bit(c.iw, fd)) m |= kModeWrite;
      if (m) v[k++] = {fd, m};
    }
    res = netpoll_wait_fds(v, k, deadline, select_check, &c, WaitReason::Select, sigmask);
    if (res >= 0) {
      // Success or timeout: the last check left the answer in the scratch sets.
      if (r) memcpy(r, c.orr, nbytes);
      if (w) memcpy(w, c.ow, nbytes);
      if (e) memcpy(e, c.oe, nbytes);
    }
    if (v != stack_v) free(v);
  }
  if (buf != stack_buf) free(buf);
  return res;
}

long select_tv(int n, fd_set* r, fd_set* w, fd_set* e, struct timeval* tv) {
  if (tv && (tv->tv_sec < 0 || tv->tv_usec < 0)) return -EINVAL;
  int64_t deadline = 0;
  if (tv) {
    // The kernel normalizes microseconds beyond a second.
    struct timespec ts = {tv->tv_sec + tv->tv_usec / 1000000, (tv->tv_usec % 1000000) * 1000};
    deadline = deadline_after_ts(&ts);
  }
  long res = select_fds(n, r, w, e, deadline, nullptr);
  if (tv && res != -EINVAL && res != -EBADF && res != -ENOMEM) {
    int64_t left = deadline - sys::nanotime();
    if (left < 0 || res == 0) left = 0;
    tv->tv_sec = left / 1000000000;
    tv->tv_usec = (left % 1000000000) / 1000;
  }
  return res;
}

namespace {

struct EpCtx {
  int epfd;
  struct epoll_event* ev;
  int max;
  PollDesc* pd;
};

long epoll_check(void* ctx) {
  EpCtx* c = (EpCtx*)ctx;
  // Like the kernel's epoll_wait, which holds the instance for the whole
  // wait: a close by another thread does not end it.
  if (!c->pd) return sys::epoll_pwait(c->epfd, c->ev, c->max, 0, nullptr);
  bool counted;
  int fd = pd_num_enter(c->pd, c->epfd, &counted);
  long r = sys::epoll_pwait(fd < 0 ? c->epfd : fd, c->ev, c->max, 0, nullptr);
  pd_num_exit(c->pd, counted);
  return r;
}

}  // namespace

static long epoll_wait_inner(int epfd, struct epoll_event* ev, int max, int64_t deadline,
                             const sigset_t* sigmask) {
  int err;
  EpCtx c = {epfd, ev, max, fd_get(epfd, &err)};
  FdInterest v = {epfd, kModeRead};  // an epoll instance is readable when it has events
  long r = netpoll_wait_fds(&v, 1, deadline, epoll_check, &c, WaitReason::EpollWait, sigmask);
  if (c.pd) pd_put(c.pd);
  return r;
}

// poll, select and epoll_wait are cancellation points: a pending
// cancellation acts at entry, and after an interrupted wait once the wait
// has given back everything it held (glibc's unwinding runs no destructor
// of this layer).
long poll_fds(struct pollfd* fds, nfds_t n, int64_t deadline, const sigset_t* sigmask) {
  cancel_point();
  long r = poll_fds_inner(fds, n, deadline, sigmask);
  if (r == -EINTR) cancel_point();
  return r;
}

long select_fds(int n, fd_set* r, fd_set* w, fd_set* e, int64_t deadline, const sigset_t* sigmask) {
  cancel_point();
  long k = select_fds_inner(n, r, w, e, deadline, sigmask);
  if (k == -EINTR) cancel_point();
  return k;
}

long epoll_wait_fd(int epfd, struct epoll_event* ev, int max, int64_t deadline,
                   const sigset_t* sigmask) {
  cancel_point();
  long r = epoll_wait_inner(epfd, ev, max, deadline, sigmask);
  if (r == -EINTR) cancel_point();
  return r;
}

}  // namespace goshim
