// The try / park / retry loop for blocking I/O (see fdio.hpp).
#include "core/fdio.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "core/fdtable.hpp"
#include "core/netpoll.hpp"
#include "core/real.hpp"
#include "core/real.hpp"
#include "core/sched.hpp"
#include "core/signal.hpp"
#include "syscalls/blocking.hpp"
#include "syscalls/sys.hpp"
#include "syscalls/sys_io.hpp"

namespace goshim {

namespace {

// Largest write handed straight to a parked reader, and the part of a
// reader's buffer it may fill (probed before parking).
constexpr size_t kHandoffMax = 64 * 1024;

inline G* io_user_g() { return fd_user_g(); }

inline long errno_result(long r) { return r < 0 ? -(long)errno : r; }

struct IoOp;
using AttemptFn = long (*)(IoOp* o, int fd);

struct IoOp {
  const char* name = "";
  uint8_t mode = kModeRead;
  WaitReason why = WaitReason::IORead;
  bool nowait = false;           // this call alone is non-blocking (MSG_DONTWAIT, RWF_NOWAIT)
  bool complete_stream = false;  // a blocking write: on a stream, run until all is written
  bool complete = false;         // run until `total` units are done (set per file)
  bool stop_eagain_progress = false;  // recvmmsg MSG_WAITFORONE
  bool plain = false;            // a plain read/write: the same-process handoff applies
  bool cancellable = true;       // a cancellation point (sendfile is none)
  bool raw_used = false;         // set by attempt (accept: the new fd is O_NONBLOCK)
  bool raised_claimed = false;   // claim_raised ran (inside a blocking call's scope)
  size_t total = 0;
  size_t done = 0;
  long timeout_result = -EAGAIN;
  int64_t progress_deadline = 0;  // recvmmsg timeout: ends the call once something arrived
  AttemptFn attempt = nullptr;   // one try (raw syscall; non-blocking underneath)
  AttemptFn passthru = nullptr;  // off a goroutine: the real libc function
  // Arguments.
  void* buf = nullptr;
  const void* cbuf = nullptr;
  size_t len = 0;
  int flags = 0;
  const struct iovec* iov = nullptr;
  int iovcnt = 0;
  struct sockaddr* addr = nullptr;
  const struct sockaddr* caddr = nullptr;
  socklen_t* alenp = nullptr;
  socklen_t alen = 0;
  struct msghdr* msg = nullptr;
  const struct msghdr* cmsg = nullptr;
  struct mmsghdr* mm = nullptr;
  long off = 0;
  off_t* offp = nullptr;
  int fd2 = -1;
};

// SO_RCVTIMEO for reads, SO_SNDTIMEO for writes (ns, 0: none).
inline int64_t timeout_of(const FileRec* f, uint8_t mode) {
  return (mode == kModeRead ? f->rcvtimeo : f->sndtimeo).load(std::memory_order_relaxed);
}

// ---- same-process channels ----------------------------------------------------------

bool chan_ok(const FileRec* f) {
  uint32_t fl = f->flags.load(std::memory_order_acquire);
  return (fl & kFileChan) && !(fl & kFileTainted) && f->epoch == fd_fork_epoch();
}

// A write into f's peer may reach the kernel: readers must look there.
// Harmless on a stale peer (it only disables a shortcut).
void bump_peer(const FileRec* f) {
  FileRec* p = __atomic_load_n(&f->peer, __ATOMIC_ACQUIRE);
  if (p) file_chan_bump(p);
}

// Hands n bytes from a write straight to a goroutine parked reading the
// writer's peer r (generation gen, read from a validated snapshot of the
// writer's descriptor). Returns n, or -1 when that is not possible.
long try_handoff(FileRec* r, uint32_t gen, const void* buf, size_t n) {
  if (n == 0 || n > kHandoffMax) return -1;
  if (r->gen.load(std::memory_order_acquire) != gen || !chan_ok(r)) return -1;
  PollDesc* rpd = r->rpd.load(std::memory_order_acquire);
  if (!rpd || rpd->nhandoff.load(std::memory_order_acquire) == 0) return -1;
  // Data already in the kernel buffer must be read first.
  if (r->chan.load(std::memory_order_acquire) & 1) return -1;
  PollWaiter* w = nullptr;
  G* gp = pd_claim_handoff_reader(rpd, r, gen, n, &w);
  if (!gp) return -1;
  // The reader is claimed and stopped: its buffer is ours until ready().
  if (n <= 16) {
    for (size_t i = 0; i < n; i++) ((char*)w->buf)[i] = ((const char*)buf)[i];
  } else {
    memcpy(w->buf, buf, n);
  }
  w->got = n;
  ready(gp, true);
  return (long)n;
}

// ---- the loop on a goroutine --------------------------------------------------------------

// Touches one byte per page of [p, p+n) for writing (value unchanged), so
// that a writer copying into a parked reader's buffer cannot fault: a bad
// buffer faults here, in the reader, as its own read would have failed.
void probe_writable(void* p, size_t n) {
  volatile char* c = (volatile char*)p;
  for (size_t off = 0; off < n; off += 4096) c[off] = c[off];
  c[n - 1] = c[n - 1];
}


}  // namespace

// pd_wait (netpoll.hpp) lives here so that the I/O loop inlines it.

WakeReason pd_wait(PollDesc* pd, uint8_t mode, uint32_t snap, int64_t deadline, WaitReason why,
                   void* hbuf, size_t hlen, size_t* got, long* err, uint32_t handled0,
                   bool cancel_point) {
  G* gp = getg();
  *err = 0;
  if (deadline && deadline <= sys::nanotime()) return WakeReason::Timeout;
  if (hbuf) probe_writable(hbuf, hlen);
  PollWaiter* w = &gp->pw;
  w->gp = gp;
  w->mode = mode;
  w->buf = hbuf;
  w->len = hlen;
  w->got = 0;
  uint64_t seq = gwait_arm(gp, WaitKind::Netpoll, cancel_point);
  w->seq = seq;
  {
    PdGuard g(pd->lock);
    long r = pd_register_locked(pd);
    if (r < 0) {
      *err = r;
    } else if (pd_events(pd, mode) == snap) {
      pd_enqueue_locked(pd, w);
    }
  }
  if (!w->linked.load(std::memory_order_relaxed)) {
    // Not parked: an event came in since the attempt, or no wait possible.
    WakeReason r = gwait_disarm(gp);
    if (*err) return r == WakeReason::Intr ? r : WakeReason::None;
    return r == WakeReason::None ? WakeReason::Ready : r;
  }
  if (__builtin_expect(gp->nhandled != handled0, 0)) {
    // A handler ran while the operation was under way: do not sleep
    // through the interruption it stands for.
    pd_unlink(w);
    WakeReason r = gwait_disarm(gp);
    w->buf = nullptr;
    return r == WakeReason::None ? WakeReason::Handled : r;
  }
  if (deadline) gwait_arm_timer(gp, seq, deadline);
  // The dump shows the fd of an I/O wait (core/dump.cpp).
  WakeReason r = gwait_park(gp, why, (const void*)(intptr_t)pd->fd.load(std::memory_order_relaxed));
  if (deadline) timer_del(&gp->timer);
  pd_unlink(w);
  if (r == WakeReason::Handoff) *got = w->got;
  w->buf = nullptr;
  return r;
}


namespace {

// Finishes one attempt's result for a complete op. Returns true with *out
// set when the operation is over.
bool settle(IoOp* op, long r, long* out) {
  if (!op->complete) {
    *out = r;
    return true;
  }
  if (r < 0) {
    *out = op->done ? (long)op->done : r;
    return true;
  }
  op->done += (size_t)r;
  if (r == 0 || op->done >= op->total) {
    *out = (long)op->done;
    return true;
  }
  return false;
}

// A write that failed with EPIPE or EFBIG (or stopped short for it) made
// the kernel raise SIGPIPE or SIGXFSZ on this kernel thread; one the G
// blocks is its own, not the M's.
// Once per operation: a second claim, after the G moved to another M,
// would take that M's instances. short_any: one system call made the
// whole operation, so any short write may have stopped for it.
inline void claim_raised(G* gp, IoOp* op, long r, bool short_any = false) {
  if (op->raised_claimed || op->mode != kModeWrite || (op->flags & MSG_NOSIGNAL)) return;
  if (r < 0 ? (r == -EPIPE || r == -EFBIG) : (op->complete || short_any) && (size_t)r < op->total) {
    op->raised_claimed = true;
    signal_claim_raised(gp, kSigRaisedByCall, r < 0 ? Raised::Now : Raised::Mine);
  }
}

long run_blocking(IoOp* op, int fd, BlockKind kind) {
  G* gp = io_user_g();
  BlockingCall bc(kind, op->name);
  long r = op->attempt(op, fd);
  // Before the blocking call's end, which may move the G to another M
  // (a short write too: a pipe's reader went away part way).
  if (gp) claim_raised(gp, op, r, true);
  return r;
}

// An operation whose descriptor was closed before it could take a
// reference starts over with a new lookup of the number, as if it had been
// called after the close (fdio_pd's result, never returned to the program).
constexpr long kRelookup = -1000000;

// The descriptor an operation works on. Until the operation must wait it
// holds no reference (fd_lookup's snapshot, validated with pd_still) and
// its syscalls use the program's fd number, exactly as a native call that
// races with close would. Before its first wait it takes a reference
// (pd_hold): from then on close keeps the file open for it (under a hidden
// number, pd->fd) until the operation ends, and its system calls go
// through attempt() (pd_num_enter: close does not free the program's
// number while one is under way) or, blocking ones, through a private
// copy of the number (blocking()).
struct OpDesc {
  PollDesc* pd;
  int fd;          // the program's number
  uint32_t seq;
  bool held = false;
  OpDesc(PollDesc* p, int f, uint32_t q) : pd(p), fd(f), seq(q) {}
  ~OpDesc() {
    if (held) pd_put(pd);
  }
  bool hold() {
    if (!held) held = pd_hold(pd, fd, seq);
    return held;
  }
  // One non-blocking system call on the file.
  template <typename F>
  long call(F fn) {
    if (!held) return fn(fd);
    bool counted;
    int n = pd_num_enter(pd, fd, &counted);
    long r = n >= 0 ? fn(n) : -EBADF;
    pd_num_exit(pd, counted);
    return r;
  }
  long attempt(IoOp* op) {
    return call([op](int n) { return op->attempt(op, n); });
  }
  // The operation as a blocking call (the file may make it wait in the
  // kernel): a held descriptor's on a private copy of the number.
  long blocking(IoOp* op, BlockKind kind) {
    if (!held) return run_blocking(op, fd, kind);
    long c = fd_private_copy(pd, fd);
    if (c < 0) return c;
    long r = run_blocking(op, (int)c, kind);
    sys::close((int)c);
    return r;
  }
  void release() {
    if (held) pd_put(pd);
    held = false;
  }
  OpDesc(const OpDesc&) = delete;
  OpDesc& operator=(const OpDesc&) = delete;
};

// A wait was interrupted. pthread_cancel interrupts waits too, and these
// calls are cancellation points: act on a pending cancellation here (glibc
// unwinds the stack without running this layer's destructors, so drop the
// reference first; the operation holds nothing else between waits).
// The wait of a call that is no cancellation point (sendfile) was ended by
// pthread_cancel, not by a signal: it waits on (natively glibc's SIGCANCEL
// handler returns and the kernel restarts the call).
bool cancel_only(WakeReason w, const IoOp* op) {
  return !op->cancellable && w == WakeReason::Intr &&
         getg()->intr_signal.load(std::memory_order_acquire) == 0;
}

// A wait ended for a signal that no handler on this G ran for (another G
// took the instance it was woken for, or it was ignored): the call goes
// on, as the kernel restarts it (signal_interrupt_lost).
bool interrupt_lost(WakeReason w, uint32_t h0) {
  return w == WakeReason::Intr && signal_interrupt_lost(getg(), h0);
}

void interrupted(OpDesc& d, const IoOp* op) {
  if (!op->cancellable || !cancel_pending(getg())) return;
  d.release();
  cancel_point();
}

// A pollable file goshim must not switch to O_NONBLOCK (inherited): wait
// for readiness in netpoll, then make the (blocking) call.
long foreign_wait_then_block(OpDesc& d, FileRec* f, IoOp* op) {
  if (!d.hold()) return kRelookup;
  PollDesc* pd = d.pd;
  int64_t timeo = timeout_of(f, op->mode);
  int64_t deadline = 0;
  bool restartable = !(f->kind == FdKind::Socket && timeo != 0);
  uint32_t h0 = getg()->nhandled;
  for (;;) {
    uint32_t snap = pd_events(pd, op->mode);
    short ev = op->mode == kModeRead ? POLLIN : POLLOUT;
    long pr = d.call([ev](int n) {
      struct pollfd p = {n, ev, 0};
      struct timespec zero = {0, 0};
      return sys::ppoll(&p, 1, &zero, nullptr);
    });
    if (pr != 0) return d.blocking(op, BlockKind::Short);
    if (timeo && !deadline) deadline = sys::nanotime() + timeo;
    size_t got;
    long err;
    WakeReason w = pd_wait(pd, op->mode, snap, deadline, op->why, nullptr, 0, &got, &err, h0, op->cancellable);
    switch (w) {
      case WakeReason::Ready:
      case WakeReason::Handoff:
        continue;
      case WakeReason::Timeout:
        return op->timeout_result;
      case WakeReason::Intr:
      case WakeReason::Handled: {
        if (cancel_only(w, op)) continue;
        if (interrupt_lost(w, h0)) {
          interrupted(d, op);
          continue;
        }
        // (Intr: the signal layer interrupted the parked G; Handled: a
        // handler ran on it before it parked.) A restarted wait counts
        // its own handlers.
        bool rs = signal_restart_since(getg(), h0);
        interrupted(d, op);
        h0 = getg()->nhandled;
        if (restartable && rs) continue;
        return -EINTR;
      }
      case WakeReason::None:
        if (err == -EPERM) return d.blocking(op, BlockKind::Long);
        return err;
    }
  }
}

// What an operation needs of its file, read from the lock-free snapshot.
struct FileView {
  FileRec* f;
  uint32_t fl;
  FileRec* peer;
  uint32_t peer_gen;
};

long fdio_pd(OpDesc& d, const FileView& v, IoOp* op) {
  PollDesc* pd = d.pd;
  FileRec* f = v.f;
  uint32_t fl = v.fl;
  if (!(fl & kFilePollable)) return run_blocking(op, d.fd, BlockKind::Short);
  share_slice_check();
  bool nonblock = (fl & kFileUserNonblock) || op->nowait;
  if (!(fl & kFileNbUnder)) {
    if (nonblock) return op->attempt(op, d.fd);
    if (!((fl & kFileOwned) && d.hold() && fd_make_nonblocking(pd, d.fd))) {
      return foreign_wait_then_block(d, f, op);
    }
    fl = f->flags.load(std::memory_order_acquire);
  }
  bool writes_peer = op->mode == kModeWrite && v.peer;
  if (writes_peer && op->plain) {
    long h = try_handoff(v.peer, v.peer_gen, op->cbuf, op->len);
    if (h >= 0) return h;
  }
  if (nonblock) {
    if (writes_peer) file_chan_bump(v.peer);
    long r = op->attempt(op, d.fd);
    if (writes_peer && r > 0) file_chan_bump(v.peer);
    return r;
  }
  op->complete = op->complete || (op->complete_stream && (fl & kFileStream));
  int64_t deadline = 0;
  bool reader_chan = op->mode == kModeRead && op->plain && op->len > 0 && chan_ok(f);
  void* hbuf = reader_chan ? op->buf : nullptr;
  size_t hlen = reader_chan ? (op->len < kHandoffMax ? op->len : kHandoffMax) : 0;
  bool first = true;
  uint32_t h0 = getg()->nhandled;
  for (;;) {
    uint32_t snap = pd_events(pd, op->mode);
    uint64_t c = reader_chan ? f->chan.load(std::memory_order_acquire) : 0;
    // First pass of a plain read of a same-process pipe known to be empty:
    // park right away, a writer will hand the data over (or its write's
    // edge wakes us). After any wake-up, ask the kernel.
    if (!(reader_chan && first && !(c & 1))) {
      if (writes_peer) file_chan_bump(v.peer);
      long r = d.attempt(op);
      if (r != -EAGAIN) {
        if (writes_peer && r > 0) file_chan_bump(v.peer);
        long out;
        if (settle(op, r, &out)) return out;
        first = false;
        continue;  // more to write: try again at once
      }
      if (op->stop_eagain_progress && op->done) return (long)op->done;
      // About to wait: from here the file must stay what it is.
      if (!d.hold()) return op->done ? (long)op->done : kRelookup;
      if (reader_chan) f->chan.compare_exchange_strong(c, c & ~1ull, std::memory_order_acq_rel);
    } else if (!d.hold()) {
      return kRelookup;
    }
    first = false;
    int64_t timeo = timeout_of(f, op->mode);
    bool restartable = !(f->kind == FdKind::Socket && timeo != 0);
    if (timeo && !deadline) deadline = sys::nanotime() + timeo;
    int64_t dl = deadline;
    if (op->progress_deadline && op->done) {
      if (sys::nanotime() >= op->progress_deadline) return (long)op->done;
      if (!dl || op->progress_deadline < dl) dl = op->progress_deadline;
    }
    size_t got = 0;
    long err = 0;
    WakeReason w = pd_wait(pd, op->mode, snap, dl, op->why, hbuf, hlen, &got, &err, h0, op->cancellable);
    switch (w) {
      case WakeReason::Handoff:
        return (long)got;
      case WakeReason::Ready:
        continue;
      case WakeReason::Timeout:
        if (op->done) return (long)op->done;
        if (deadline && sys::nanotime() < deadline) continue;  // the progress deadline, unmet
        return op->timeout_result;
      case WakeReason::Intr:
      case WakeReason::Handled: {
        if (cancel_only(w, op)) continue;
        if (interrupt_lost(w, h0)) {
          interrupted(d, op);
          continue;
        }
        bool rs = signal_restart_since(getg(), h0);  // (as foreign_wait_then_block)
        if (op->done) return (long)op->done;
        interrupted(d, op);
        h0 = getg()->nhandled;
        if (restartable && rs) continue;
        return -EINTR;
      }
      case WakeReason::None:
        if (err == -EPERM) return d.blocking(op, BlockKind::Long);
        return op->done ? (long)op->done : err;
    }
  }
}

long fdio_g(int fd, IoOp* op) {
  // These calls are cancellation points (but sendfile): a pending one acts at entry.
  if (op->cancellable) cancel_point();
  for (;;) {
    int err;
    uint32_t seq;
    PollDesc* pd = fd_lookup(fd, &seq, &err);
    if (!pd) {
      if (err == -EBADF) return -EBADF;
      // Untracked (beyond the table, or the number is being closed and may
      // already name a file goshim has not seen): the kernel decides.
      return run_blocking(op, fd, BlockKind::Long);
    }
    FileView v;
    v.f = __atomic_load_n(&pd->file, __ATOMIC_ACQUIRE);
    v.fl = v.f ? v.f->flags.load(std::memory_order_acquire) : 0;
    v.peer = v.f ? __atomic_load_n(&v.f->peer, __ATOMIC_ACQUIRE) : nullptr;
    v.peer_gen = v.f ? v.f->peer_gen : 0;
    if (!v.f || !pd_still(pd, seq)) continue;  // closed and reused meanwhile: look again
    OpDesc d(pd, fd, seq);
    long r = fdio_pd(d, v, op);
    if (r != kRelookup) return r;
  }
}

// ---- off a goroutine ---------------------------------------------------------------------

// Remaining ms until deadline for poll(): -1 without one, rounded up.
int poll_ms(int64_t deadline) {
  if (!deadline) return -1;
  int64_t left = deadline - sys::nanotime();
  if (left <= 0) return 0;
  int64_t ms = (left + 999999) / 1000000;
  return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

long fdio_kt(int fd, IoOp* op) {
  if (op->nowait || !fd_emulates_blocking(fd)) {
    PollDesc* hint = op->mode == kModeWrite ? fd_peek(fd) : nullptr;
    FileRec* f = hint ? hint->file : nullptr;  // type-stable: a stale one only bumps needlessly
    if (f) bump_peer(f);
    long r = op->passthru(op, fd);
    if (f && r > 0) bump_peer(f);
    return r;
  }
  int err;
  PollDesc* pd = fd_get(fd, &err);
  if (!pd) return op->passthru(op, fd);
  FileRec* f = pd->file;
  uint32_t fl = f->flags.load(std::memory_order_acquire);
  op->complete = op->complete || (op->complete_stream && (fl & kFileStream));
  bool writes_peer = op->mode == kModeWrite && __atomic_load_n(&f->peer, __ATOMIC_ACQUIRE);
  int64_t timeo = timeout_of(f, op->mode);
  int64_t deadline = timeo ? sys::nanotime() + timeo : 0;
  // As the kernel does for a blocking call: a program handler without
  // SA_RESTART (or any handler, on a socket with a timeout) ends the wait
  // with EINTR; goshim's own signals and SA_RESTART handlers restart it.
  bool restartable = !(f->kind == FdKind::Socket && timeo != 0);
  long out;
  for (;;) {
    bool counted;
    int n = pd_num_enter(pd, fd, &counted);
    if (writes_peer) bump_peer(f);
    long r = n >= 0 ? op->attempt(op, n) : -EBADF;
    pd_num_exit(pd, counted);
    if (r != -EAGAIN) {
      if (writes_peer && r > 0) bump_peer(f);
      if (settle(op, r, &out)) break;
      continue;
    }
    if (op->stop_eagain_progress && op->done) {
      out = (long)op->done;
      break;
    }
    struct pollfd p = {n, (short)(op->mode == kModeRead ? POLLIN : POLLOUT), 0};
    uint32_t h0 = signal_thread_handled();
    // libc's poll: where a kernel thread (or a goroutine in a signal
    // handler) canceled in this call is unwound, as in the read it stands
    // for; drop the reference then, or close would keep the file open for
    // ever under a hidden number.
    struct PollArgs {
      struct pollfd* p;
      int ms;
    } pa = {&p, poll_ms(deadline)};
    int pr = (int)goshim_call_undo_on_unwind(
        [](void* c) { return (long)real::poll(((PollArgs*)c)->p, 1, ((PollArgs*)c)->ms); }, &pa,
        [](void* d) { pd_put((PollDesc*)d); }, pd);
    if (pr == 0) {
      out = op->done ? (long)op->done : op->timeout_result;
      break;
    }
    if (pr < 0 && errno == EINTR) {
      if (signal_thread_handled() != h0 && !(restartable && signal_thread_restart_since(h0))) {
        out = op->done ? (long)op->done : -EINTR;
        break;
      }
    }
  }
  pd_put(pd);
  return out;
}

long run(int fd, IoOp* op) {
  if (G* gp = io_user_g()) {
    long r = fdio_g(fd, op);
    claim_raised(gp, op, r);
    return r;
  }
  if (__builtin_expect(real::read == nullptr, 0)) {  // before goshim's constructor
    real::resolve();
  }
  return fdio_kt(fd, op);
}

// The iovec tail after skipping `skip` bytes, at most max entries.
int iov_window(const struct iovec* iov, int cnt, size_t skip, struct iovec* out, int max) {
  int i = 0;
  while (i < cnt && skip >= iov[i].iov_len) {
    skip -= iov[i].iov_len;
    i++;
  }
  int k = 0;
  for (; i < cnt && k < max; i++, k++) {
    out[k].iov_base = (char*)iov[i].iov_base + skip;
    out[k].iov_len = iov[i].iov_len - skip;
    skip = 0;
  }
  return k;
}

size_t iov_total(const struct iovec* iov, int cnt) {
  size_t t = 0;
  for (int i = 0; i < cnt; i++) {
    if (iov[i].iov_len > (size_t)0x7ffff000 - t) return (size_t)0x7ffff000;
    t += iov[i].iov_len;
  }
  return t;
}

constexpr int kIovWindow = 64;

}  // namespace

// ---- operations ---------------------------------------------------------------------------

__attribute__((flatten)) long io_read(int fd, void* buf, size_t n) {
  IoOp op;
  op.name = "read";
  op.buf = buf;
  op.len = n;
  op.plain = true;
  op.attempt = [](IoOp* o, int f) { return sys::read(f, o->buf, o->len); };
  op.passthru = [](IoOp* o, int f) { return errno_result(real::read(f, o->buf, o->len)); };
  return run(fd, &op);
}

__attribute__((flatten)) long io_write(int fd, const void* buf, size_t n) {
  IoOp op;
  op.name = "write";
  op.mode = kModeWrite;
  op.why = WaitReason::IOWrite;
  op.cbuf = buf;
  op.len = n;
  op.total = n;
  op.plain = true;
  op.complete_stream = true;
  op.attempt = [](IoOp* o, int f) {
    return sys::write(f, (const char*)o->cbuf + o->done, o->len - o->done);
  };
  op.passthru = [](IoOp* o, int f) { return errno_result(real::write(f, o->cbuf, o->len)); };
  return run(fd, &op);
}

__attribute__((flatten)) long io_readv(int fd, const struct iovec* iov, int cnt) {
  IoOp op;
  op.name = "readv";
  op.iov = iov;
  op.iovcnt = cnt;
  op.attempt = [](IoOp* o, int f) { return sys::readv(f, o->iov, o->iovcnt); };
  op.passthru = [](IoOp* o, int f) { return errno_result(real::readv(f, o->iov, o->iovcnt)); };
  return run(fd, &op);
}

__attribute__((flatten)) long io_writev(int fd, const struct iovec* iov, int cnt) {
  IoOp op;
  op.name = "writev";
  op.mode = kModeWrite;
  op.why = WaitReason::IOWrite;
  op.iov = iov;
  op.iovcnt = cnt;
  op.complete_stream = cnt > 0 && cnt <= 1024;
  op.total = op.complete_stream ? iov_total(iov, cnt) : 0;
  op.attempt = [](IoOp* o, int f) {
    if (o->done == 0) return sys::writev(f, o->iov, o->iovcnt);
    struct iovec win[kIovWindow];
    int k = iov_window(o->iov, o->iovcnt, o->done, win, kIovWindow);
    return sys::writev(f, win, k);
  };
  op.passthru = [](IoOp* o, int f) { return errno_result(real::writev(f, o->iov, o->iovcnt)); };
  return run(fd, &op);
}

long io_preadv2(int fd, const struct iovec* iov, int cnt, long off, int flags) {
  IoOp op;
  op.name = "preadv";
  op.iov = iov;
  op.iovcnt = cnt;
  op.off = off;
  op.flags = flags;
  op.nowait = flags & RWF_NOWAIT;
  op.attempt = [](IoOp* o, int f) { return sys::preadv2(f, o->iov, o->iovcnt, o->off, o->flags); };
  op.passthru = [](IoOp* o, int f) {
    return errno_result(real::preadv2(f, o->iov, o->iovcnt, o->off, o->flags));
  };
  return run(fd, &op);
}

long io_pwritev2(int fd, const struct iovec* iov, int cnt, long off, int flags) {
  IoOp op;
  op.name = "pwritev";
  op.mode = kModeWrite;
  op.why = WaitReason::IOWrite;
  op.iov = iov;
  op.iovcnt = cnt;
  op.off = off;
  op.flags = flags;
  op.nowait = flags & RWF_NOWAIT;
  // At the current position (off -1) it is a writev: complete it likewise.
  op.complete_stream = off == -1 && cnt > 0 && cnt <= 1024;
  op.total = op.complete_stream ? iov_total(iov, cnt) : 0;
  op.attempt = [](IoOp* o, int f) {
    if (o->done == 0) return sys::pwritev2(f, o->iov, o->iovcnt, o->off, o->flags);
    struct iovec win[kIovWindow];
    int k = iov_window(o->iov, o->iovcnt, o->done, win, kIovWindow);
    return sys::pwritev2(f, win, k, o->off, o->flags);
  };
  op.passthru = [](IoOp* o, int f) {
    return errno_result(real::pwritev2(f, o->iov, o->iovcnt, o->off, o->flags));
  };
  return run(fd, &op);
}

long io_pread(int fd, void* buf, size_t n, long off) {
  IoOp op;
  op.name = "pread";
  op.buf = buf;
  op.len = n;
  op.off = off;
  op.attempt = [](IoOp* o, int f) { return sys::pread(f, o->buf, o->len, o->off); };
  op.passthru = [](IoOp* o, int f) { return errno_result(real::pread(f, o->buf, o->len, o->off)); };
  return run(fd, &op);
}

long io_pwrite(int fd, const void* buf, size_t n, long off) {
  IoOp op;
  op.name = "pwrite";
  op.mode = kModeWrite;
  op.why = WaitReason::IOWrite;
  op.cbuf = buf;
  op.len = n;
  op.off = off;
  op.attempt = [](IoOp* o, int f) { return sys::pwrite(f, o->cbuf, o->len, o->off); };
  op.passthru = [](IoOp* o, int f) {
    return errno_result(real::pwrite(f, o->cbuf, o->len, o->off));
  };
  return run(fd, &op);
}

__attribute__((flatten)) long io_recvfrom(int fd, void* buf, size_t n, int flags,
                                          struct sockaddr* a, socklen_t* alen) {
  IoOp op;
  op.name = "recv";
  op.buf = buf;
  op.len = n;
  op.flags = flags;
  op.addr = a;
  op.alenp = alen;
  op.nowait = flags & MSG_DONTWAIT;
  op.plain = flags == 0 && !a;
  // MSG_WAITALL on a stream: blocks until n bytes (or EOF, error, signal).
  op.complete_stream = (flags & MSG_WAITALL) && !(flags & (MSG_PEEK | MSG_TRUNC));
  op.total = n;
  op.attempt = [](IoOp* o, int f) {
    return sys::recvfrom(f, (char*)o->buf + o->done, o->len - o->done, o->flags, o->addr, o->alenp);
  };
  op.passthru = [](IoOp* o, int f) {
    return errno_result(real::recvfrom(f, o->buf, o->len, o->flags, o->addr, o->alenp));
  };
  return run(fd, &op);
}

__attribute__((flatten)) long io_sendto(int fd, const void* buf, size_t n, int flags,
                                        const struct sockaddr* a, socklen_t alen) {
  IoOp op;
  op.name = "send";
  op.mode = kModeWrite;
  op.why = WaitReason::IOWrite;
  op.cbuf = buf;
  op.len = n;
  op.total = n;
  op.flags = flags;
  op.caddr = a;
  op.alen = alen;
  op.nowait = flags & MSG_DONTWAIT;
  op.plain = !a && (flags & ~(MSG_NOSIGNAL | MSG_DONTWAIT)) == 0;
  op.complete_stream = !(flags & MSG_OOB);
  op.attempt = [](IoOp* o, int f) {
    return sys::sendto(f, (const char*)o->cbuf + o->done, o->len - o->done, o->flags, o->caddr,
                       o->alen);
  };
  op.passthru = [](IoOp* o, int f) {
    return errno_result(real::sendto(f, o->cbuf, o->len, o->flags, o->caddr, o->alen));
  };
  return run(fd, &op);
}

__attribute__((flatten)) long io_recvmsg(int fd, struct msghdr* m, int flags) {
  IoOp op;
  op.name = "recvmsg";
  op.msg = m;
  op.flags = flags;
  op.nowait = flags & MSG_DONTWAIT;
  op.complete_stream = (flags & MSG_WAITALL) && !(flags & (MSG_PEEK | MSG_TRUNC)) && m &&
                       m->msg_iovlen > 0 && m->msg_iovlen <= 1024;
  op.total = op.complete_stream ? iov_total(m->msg_iov, (int)m->msg_iovlen) : 0;
  op.attempt = [](IoOp* o, int f) {
    if (o->done == 0) return sys::recvmsg(f, o->msg, o->flags);
    // Later parts of a MSG_WAITALL read: the data only.
    struct iovec win[kIovWindow];
    struct msghdr h = {};
    h.msg_iov = win;
    h.msg_iovlen = (size_t)iov_window(o->msg->msg_iov, (int)o->msg->msg_iovlen, o->done, win,
                                      kIovWindow);
    return sys::recvmsg(f, &h, o->flags);
  };
  op.passthru = [](IoOp* o, int f) { return errno_result(real::recvmsg(f, o->msg, o->flags)); };
  return run(fd, &op);
}

__attribute__((flatten)) long io_sendmsg(int fd, const struct msghdr* m, int flags) {
  IoOp op;
  op.name = "sendmsg";
  op.mode = kModeWrite;
  op.why = WaitReason::IOWrite;
  op.cmsg = m;
  op.flags = flags;
  op.nowait = flags & MSG_DONTWAIT;
  op.complete_stream =
      !(flags & MSG_OOB) && m && m->msg_iovlen > 0 && m->msg_iovlen <= 1024 && !m->msg_name;
  op.total = op.complete_stream ? iov_total(m->msg_iov, (int)m->msg_iovlen) : 0;
  op.attempt = [](IoOp* o, int f) {
    if (o->done == 0) return sys::sendmsg(f, o->cmsg, o->flags);
    // The rest of a stream message: data only (control went with the first part).
    struct iovec win[kIovWindow];
    struct msghdr h = {};
    h.msg_iov = win;
    h.msg_iovlen = (size_t)iov_window(o->cmsg->msg_iov, (int)o->cmsg->msg_iovlen, o->done, win,
                                      kIovWindow);
    return sys::sendmsg(f, &h, o->flags);
  };
  op.passthru = [](IoOp* o, int f) { return errno_result(real::sendmsg(f, o->cmsg, o->flags)); };
  return run(fd, &op);
}

long io_recvmmsg(int fd, struct mmsghdr* v, unsigned n, int flags, struct timespec* t) {
  IoOp op;
  op.name = "recvmmsg";
  op.mm = v;
  op.len = n;
  op.total = n;
  op.flags = flags & ~MSG_WAITFORONE;
  op.nowait = flags & MSG_DONTWAIT;
  op.complete = true;  // counts messages
  op.stop_eagain_progress = flags & MSG_WAITFORONE;
  if (t) {
    // The kernel checks the timeout only after each datagram.
    if (t->tv_sec < 0 || t->tv_nsec < 0 || t->tv_nsec >= 1000000000) return -EINVAL;
    op.progress_deadline = sys::nanotime() + (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
    if (op.progress_deadline == 0) op.progress_deadline = 1;
  }
  op.buf = t;
  op.attempt = [](IoOp* o, int f) {
    return sys::recvmmsg(f, o->mm + o->done, (unsigned)(o->len - o->done), o->flags, nullptr);
  };
  op.passthru = [](IoOp* o, int f) {
    int fl = o->flags | (o->stop_eagain_progress ? MSG_WAITFORONE : 0);
    return errno_result(real::recvmmsg(f, o->mm, (unsigned)o->len, fl, (struct timespec*)o->buf));
  };
  long r = run(fd, &op);
  if (t && op.progress_deadline && io_user_g()) {
    int64_t left = op.progress_deadline - sys::nanotime();
    if (left < 0) left = 0;
    t->tv_sec = left / 1000000000;
    t->tv_nsec = left % 1000000000;
  }
  return r;
}

long io_sendmmsg(int fd, struct mmsghdr* v, unsigned n, int flags) {
  IoOp op;
  op.name = "sendmmsg";
  op.mode = kModeWrite;
  op.why = WaitReason::IOWrite;
  op.mm = v;
  op.len = n;
  op.total = n;
  op.flags = flags;
  op.nowait = flags & MSG_DONTWAIT;
  op.complete = n > 0;  // counts messages
  op.attempt = [](IoOp* o, int f) {
    return sys::sendmmsg(f, o->mm + o->done, (unsigned)(o->len - o->done), o->flags);
  };
  op.passthru = [](IoOp* o, int f) {
    return errno_result(real::sendmmsg(f, o->mm, (unsigned)o->len, o->flags));
  };
  return run(fd, &op);
}

long io_accept4(int fd, struct sockaddr* a, socklen_t* alen, int flags) {
  IoOp op;
  op.name = "accept";
  op.why = WaitReason::Accept;
  op.addr = a;
  op.alenp = alen;
  op.flags = flags;
  op.attempt = [](IoOp* o, int f) {
    // A new socket is O_NONBLOCK from here until fd_new records it.
    o->raw_used = true;
    fd_creating_begin();
    long r = sys::accept4(f, o->addr, o->alenp, o->flags | SOCK_NONBLOCK);
    if (r < 0) fd_creating_end();
    return r;
  };
  op.passthru = [](IoOp* o, int f) {
    o->raw_used = false;
    return errno_result(real::accept4(f, o->addr, o->alenp, o->flags));
  };
  long r = run(fd, &op);
  if (r >= 0) {
    // A connection accepted: a socket of the listener's type, with its
    // timeouts (the kernel copies them), and the program's own flags.
    PollDesc* lpd = fd_peek(fd);
    FileRec* lf = lpd ? lpd->file : nullptr;
    uint32_t lfl = lf ? lf->flags.load(std::memory_order_acquire) : kFileStream;
    uint32_t fl = kFileOwned | kFilePollable | (lfl & (kFileStream | kFileUnix));
    if (flags & SOCK_NONBLOCK) fl |= kFileUserNonblock;
    if (op.raw_used) fl |= kFileNbUnder;
    FileRec* nf = fd_new((int)r, FdKind::Socket, fl);
    if (op.raw_used) fd_creating_end();
    if (nf && lf) {
      nf->rcvtimeo.store(lf->rcvtimeo.load(std::memory_order_relaxed), std::memory_order_relaxed);
      nf->sndtimeo.store(lf->sndtimeo.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
  }
  return r;
}

namespace {

// A blocking connect the kernel could not finish at once (a socket the
// program sees blocking, O_NONBLOCK underneath): wait for writability, then
// read the outcome. timeout_result: what the call returns when SO_SNDTIMEO
// expires (EINPROGRESS for a new attempt, EALREADY when one was already
// under way, as the kernel's connect).
long connect_wait(PollDesc* pd, int pfd, FileRec* f, uint32_t snap, long timeout_result) {
  int64_t timeo = f->sndtimeo.load(std::memory_order_relaxed);
  int64_t deadline = timeo ? sys::nanotime() + timeo : 0;
  bool restartable = timeo == 0;
  uint32_t h0 = getg()->nhandled;
  for (;;) {
    size_t got;
    long err;
    WakeReason w = pd_wait(pd, kModeWrite, snap, deadline, WaitReason::Connect, nullptr, 0, &got,
                           &err, h0, true);
    switch (w) {
      case WakeReason::Timeout:
        return timeout_result;  // as a blocking connect whose SO_SNDTIMEO expired
      case WakeReason::Intr:
      case WakeReason::Handled: {
        if (interrupt_lost(w, h0)) break;  // waits on, as the kernel restarts it
        bool rs = signal_restart_since(getg(), h0);
        h0 = getg()->nhandled;
        if (restartable && rs) break;  // a restarted connect keeps waiting
        return -EINTR;                 // the connection goes on in the background
      }
      case WakeReason::None:
        return err;
      default:
        break;
    }
    snap = pd_events(pd, kModeWrite);
    int soerr = 0;
    bool counted;
    int fd = pd_num_enter(pd, pfd, &counted);
    socklen_t len = sizeof soerr;
    long r = fd >= 0 ? sys::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) : -EBADF;
    if (r == 0 && !soerr) {
      // SO_ERROR 0 may be a spurious wake-up: connected only if there is a peer.
      struct sockaddr_storage ss;
      socklen_t sl = sizeof ss;
      r = sys::raw3(SYS_getpeername, fd, (long)&ss, (long)&sl);
      soerr = r == -ENOTCONN ? EINPROGRESS : 0;
    }
    pd_num_exit(pd, counted);
    if (r < 0 && r != -ENOTCONN) return r;
    if (soerr == EINPROGRESS || soerr == EALREADY || soerr == EINTR) continue;
    if (soerr) return -soerr;
    return 0;
  }
}

// AF_UNIX: a full listen backlog gives EAGAIN to a non-blocking connect,
// and no fd event announces room. Do it the blocking way, as a blocking call.
long connect_unix_blocking(int fd, const struct sockaddr* a, socklen_t alen) {
  long fl = sys::fcntl(fd, F_GETFL, 0);
  if (fl < 0) return fl;
  sys::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  long r;
  {
    BlockingCall bc(BlockKind::Long, "connect");
    r = sys::connect(fd, a, alen);
  }
  sys::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  return r;
}

}  // namespace

long io_connect(int fd, const struct sockaddr* a, socklen_t alen) {
  if (!io_user_g()) {
    if (!fd_emulates_blocking(fd)) return errno_result(real::connect(fd, a, alen));
    long r = sys::connect(fd, a, alen);
    if (r == -EAGAIN) {
      // libc's connect on the socket made blocking for it: a cancellation
      // point, which unwinds a canceled caller (a kernel thread, a
      // goroutine in a signal handler) from inside; goshim's O_NONBLOCK
      // goes back on the way, or later goroutine calls on it would block
      // their kernel thread.
      struct ConnArgs {
        int fd;
        const struct sockaddr* a;
        socklen_t alen;
        long fl;
      } ca = {fd, a, alen, sys::fcntl(fd, F_GETFL, 0)};
      sys::fcntl(fd, F_SETFL, ca.fl & ~O_NONBLOCK);
      r = errno_result(goshim_call_undo_on_unwind(
          [](void* c) {
            ConnArgs* x = (ConnArgs*)c;
            return (long)real::connect(x->fd, x->a, x->alen);
          },
          &ca,
          [](void* c) {
            ConnArgs* x = (ConnArgs*)c;
            sys::fcntl(x->fd, F_SETFL, x->fl | O_NONBLOCK);
          },
          &ca));
      sys::fcntl(fd, F_SETFL, ca.fl | O_NONBLOCK);
      return r;
    }
    if (r != -EINPROGRESS && r != -EALREADY) return r;
    // Wait as the kernel's blocking connect would: until the attempt ends
    // or SO_SNDTIMEO expires (then EINPROGRESS, or EALREADY for an attempt
    // that was already under way).
    PollDesc* hint = fd_peek(fd);
    FileRec* f = hint ? hint->file : nullptr;  // type-stable: a stale one only misreads a timeout
    int64_t timeo = f ? f->sndtimeo.load(std::memory_order_relaxed) : 0;
    int64_t deadline = timeo ? sys::nanotime() + timeo : 0;
    for (;;) {
      struct pollfd p = {fd, POLLOUT, 0};
      int pr = real::poll(&p, 1, poll_ms(deadline));
      if (pr == 0) return r;
      if (pr < 0) {
        if (errno == EINTR) continue;
        return -errno;
      }
      int soerr = 0;
      socklen_t len = sizeof soerr;
      long g = sys::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
      if (g < 0) return g;
      if (soerr) return -soerr;
      struct sockaddr_storage ss;
      socklen_t sl = sizeof ss;
      g = sys::raw3(SYS_getpeername, fd, (long)&ss, (long)&sl);
      if (g != -ENOTCONN) return g;
    }
  }
  cancel_point();
  int err;
  PollDesc* pd = fd_get(fd, &err);
  if (!pd) {
    if (err == -EBADF) return -EBADF;
    BlockingCall bc(BlockKind::Long, "connect");
    return sys::connect(fd, a, alen);
  }
  FileRec* f = pd->file;
  uint32_t fl = f->flags.load(std::memory_order_acquire);
  long r;
  bool counted;
  if (fl & kFileUserNonblock) {
    int n = pd_num_enter(pd, fd, &counted);
    r = n >= 0 ? sys::connect(n, a, alen) : -EBADF;
    pd_num_exit(pd, counted);
  } else if (!(fl & kFileNbUnder) && !((fl & kFileOwned) && fd_make_nonblocking(pd, fd))) {
    // Blocking in the kernel: on a private copy (close must not wait).
    long c = fd_private_copy(pd, fd);
    if (c >= 0) {
      BlockingCall bc(BlockKind::Long, "connect");
      r = sys::connect((int)c, a, alen);
    } else {
      r = c;
    }
    if (c >= 0) sys::close((int)c);
  } else {
    uint32_t snap = pd_events(pd, kModeWrite);
    int n = pd_num_enter(pd, fd, &counted);
    r = n >= 0 ? sys::connect(n, a, alen) : -EBADF;
    pd_num_exit(pd, counted);
    if (r == -EAGAIN && (fl & kFileUnix)) {
      long c = fd_private_copy(pd, fd);
      r = c >= 0 ? connect_unix_blocking((int)c, a, alen) : c;
      if (c >= 0) sys::close((int)c);
    } else if (r == -EINPROGRESS) {
      r = connect_wait(pd, fd, f, snap, -EINPROGRESS);
    } else if (r == -EALREADY) {
      // An attempt already under way (an earlier connect was interrupted or
      // timed out): a blocking connect waits for it like the first one.
      r = connect_wait(pd, fd, f, snap, -EALREADY);
    }
  }
  pd_put(pd);
  if (r == -EINTR) cancel_point();  // an interrupted wait may be a cancellation
  return r;
}

long io_sendfile(int out, int in, off_t* off, size_t n) {
  IoOp op;
  op.name = "sendfile";
  op.mode = kModeWrite;
  op.why = WaitReason::IOWrite;
  op.fd2 = in;
  op.offp = off;
  op.len = n;
  op.total = n;
  op.complete_stream = true;
  op.cancellable = false;  // glibc's sendfile is no cancellation point
  op.attempt = [](IoOp* o, int f) { return sys::sendfile(f, o->fd2, o->offp, o->len - o->done); };
  op.passthru = [](IoOp* o, int f) {
    return errno_result(real::sendfile(f, o->fd2, o->offp, o->len));
  };
  return run(out, &op);
}

namespace {

// splice and tee move data between two fds, either of which may block.
struct TwoFd {
  int in, out;
  loff_t* offin;
  loff_t* offout;
  size_t n;
  unsigned flags;
  bool is_tee;
};

long twofd_attempt(TwoFd* t) {
  return t->is_tee ? sys::tee(t->in, t->out, t->n, t->flags)
                   : sys::splice(t->in, t->offin, t->out, t->offout, t->n, t->flags);
}

long twofd_check(void* ctx) {
  TwoFd* t = (TwoFd*)ctx;
  struct pollfd p[2] = {{t->in, POLLIN, 0}, {t->out, POLLOUT, 0}};
  struct timespec zero = {0, 0};
  long r = sys::ppoll(p, 2, &zero, nullptr);
  if (r < 0) return r;
  // Both ends must be able to move data; an error or hangup ends the wait
  // too (the retry reports it).
  short bad = POLLERR | POLLHUP | POLLNVAL;
  bool in_ok = (p[0].revents & (POLLIN | bad)) != 0;
  bool out_ok = (p[1].revents & (POLLOUT | bad)) != 0;
  return in_ok && out_ok ? 1 : 0;
}

// Whether an end needs goshim to wait: O_NONBLOCK underneath while the
// program sees it blocking. *foreign: an end that blocks in the kernel.
bool end_waits(PollDesc* pd, int fd, bool* foreign) {
  FileRec* f = pd->file;
  uint32_t fl = f->flags.load(std::memory_order_acquire);
  if (!(fl & kFilePollable) || (fl & kFileUserNonblock)) return false;
  if (!(fl & kFileNbUnder) && !((fl & kFileOwned) && fd_make_nonblocking(pd, fd))) {
    *foreign = true;
    return false;
  }
  return true;
}

long twofd(TwoFd* t) {
  bool nowait = t->flags & SPLICE_F_NONBLOCK;
  if (io_user_g()) cancel_point();
  if (!io_user_g()) {
    if (nowait || (!fd_emulates_blocking(t->in) && !fd_emulates_blocking(t->out)))
      return t->is_tee
                 ? errno_result(real::tee(t->in, t->out, t->n, t->flags))
                 : errno_result(real::splice(t->in, t->offin, t->out, t->offout, t->n, t->flags));
    for (;;) {
      long r = twofd_attempt(t);
      if (r != -EAGAIN) return r;
      struct pollfd p[2] = {{t->in, POLLIN, 0}, {t->out, POLLOUT, 0}};
      uint32_t h0 = signal_thread_handled();
      // Either end: re-check soon. A handler without SA_RESTART ends the
      // call with EINTR, as in the kernel's pipe wait.
      if (real::poll(p, 2, 10) < 0 && errno == EINTR) {
        if (signal_thread_handled() != h0 && !signal_thread_restart_since(h0)) return -EINTR;
      }
    }
  }
  int err;
  PollDesc* pin = fd_get(t->in, &err);
  if (!pin) return err == -EBADF ? -EBADF : twofd_attempt(t);
  PollDesc* pout = fd_get(t->out, &err);
  if (!pout) {
    pd_put(pin);
    return err == -EBADF ? -EBADF : twofd_attempt(t);
  }
  bool foreign = false;
  bool win = end_waits(pin, t->in, &foreign);
  bool wout = end_waits(pout, t->out, &foreign);
  FileRec* fout = pout->file;
  long r;
  bool claimed = false;
  if (nowait || (!win && !wout)) {
    bump_peer(fout);
    if (foreign) {
      BlockingCall bc(BlockKind::Long, t->is_tee ? "tee" : "splice");
      r = twofd_attempt(t);
      // Before the blocking call's end (run_blocking).
      if (r == -EPIPE) {
        signal_claim_raised(io_user_g(), kSigRaisedByCall, Raised::Now);
        claimed = true;
      }
    } else {
      r = twofd_attempt(t);
    }
    if (r > 0) bump_peer(fout);
  } else {
    FdInterest v[2] = {{t->in, (uint8_t)(win ? kModeRead : 0)},
                       {t->out, (uint8_t)(wout ? kModeWrite : 0)}};
    for (;;) {
      bump_peer(fout);
      r = twofd_attempt(t);
      if (r > 0) bump_peer(fout);
      if (r != -EAGAIN) break;
      bool rs = false;
      long w = netpoll_wait_fds(v, 2, 0, twofd_check, t, WaitReason::IOWrite, nullptr, &rs);
      if (w == -EINTR) {
        // A restarted wait (SA_RESTART) is a new netpoll_wait_fds: it
        // counts its own handlers.
        if (!rs) {
          r = -EINTR;
          break;
        }
      } else if (w < 0) {
        r = w;
        break;
      }
    }
  }
  pd_put(pout);
  pd_put(pin);
  if (r == -EINTR) cancel_point();
  if (r == -EPIPE && !claimed) signal_claim_raised(io_user_g(), kSigRaisedByCall, Raised::Now);
  return r;
}

}  // namespace

long io_splice(int in, loff_t* offin, int out, loff_t* offout, size_t n, unsigned flags) {
  TwoFd t = {in, out, offin, offout, n, flags, false};
  return twofd(&t);
}

long io_tee(int in, int out, size_t n, unsigned flags) {
  TwoFd t = {in, out, nullptr, nullptr, n, flags, true};
  return twofd(&t);
}

long io_vmsplice(int fd, const struct iovec* iov, unsigned long cnt, unsigned flags) {
  IoOp op;
  op.name = "vmsplice";
  long acc = sys::fcntl(fd, F_GETFL, 0);
  if (acc >= 0 && (acc & O_ACCMODE) == O_WRONLY) {
    op.mode = kModeWrite;
    op.why = WaitReason::IOWrite;
  }
  op.iov = iov;
  op.iovcnt = (int)cnt;
  op.flags = (int)flags;
  op.nowait = flags & SPLICE_F_NONBLOCK;
  op.attempt = [](IoOp* o, int f) {
    return sys::vmsplice(f, o->iov, (unsigned long)o->iovcnt, (unsigned)o->flags);
  };
  op.passthru = [](IoOp* o, int f) {
    return errno_result(real::vmsplice(f, o->iov, (size_t)o->iovcnt, (unsigned)o->flags));
  };
  return run(fd, &op);
}

}  // namespace goshim
