// The fd table (see fdtable.hpp).
//
// Slots: fd -> one 64-bit word, in 4096-entry chunks mapped on first use,
// for fds below kMaxFd. The word is (generation << 32 | state); the state
// is kEmpty (unknown: classify on first use), kClosing (a close of the
// number is under way) or a live descriptor's arena index + 2. Every
// change of the word increments the generation, so a compare-and-swap
// from a word read earlier fails if anything happened to the number in
// between (fdtable.hpp: "Numbers and the kernel").
//
//   fd_get (any op)                      fd_close_begin
//   ---------------                      --------------
//   refs++ (CAS from >0)        [S]      slot = (g+1, kClosing) (CAS) [S]
//   #StoreLoad (seq_cst)                 #StoreLoad (seq_cst)
//   slot still == word?         [L]      refs > 1 ? orphan : detach   [L]
//
// so either close sees the operation (and keeps the file open for it under
// a hidden number) or the operation sees the close (and drops its ref).
#include "core/fdtable.hpp"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <termios.h>

#include <new>

#include "core/fork.hpp"
#include "core/netpoll.hpp"
#include "core/rawlog.hpp"
#include "core/sched.hpp"
#include "core/scstore.hpp"
#include "syscalls/sys.hpp"
#include "syscalls/sys_io.hpp"

namespace goshim {

std::atomic<uint32_t> g_fork_epoch{1};
std::atomic<int32_t> g_fd_creating{0};

namespace {

// ---- arenas -------------------------------------------------------------------------

constexpr uint32_t kPdChunk = 1024;
constexpr uint32_t kPdChunks = 4096;  // up to 4M descriptors
constexpr uint32_t kFileChunk = 1024;

Mutex arena_lock{LockRank::FdArena};  // free lists and chunk allocation

struct ArenaGuard {
  FdlScope busy;
  ArenaGuard() { arena_lock.lock(); }
  ~ArenaGuard() { arena_lock.unlock(); }
};
std::atomic<PollDesc*> pd_chunks[kPdChunks];
uint32_t pd_next = 0;  // arena_lock
PollDesc* pd_freelist = nullptr;
FileRec* file_chunk = nullptr;
uint32_t file_chunk_left = 0;
FileRec* file_freelist = nullptr;
std::atomic<int32_t> live_descs{0};

void* map_chunk(size_t bytes) {
  void* p = sys::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fatal("fd table: cannot map memory");
  return p;
}

PollDesc* pd_alloc() {
  ArenaGuard g;
  PollDesc* pd = pd_freelist;
  if (pd) {
    pd_freelist = pd->freelink;
    pd->freelink = nullptr;
  } else {
    uint32_t idx = pd_next;
    if (idx >= kPdChunk * kPdChunks) fatal("fd table: too many descriptors");
    PollDesc* chunk = pd_chunks[idx / kPdChunk].load(std::memory_order_relaxed);
    if (!chunk) {
      chunk = (PollDesc*)map_chunk(sizeof(PollDesc) * kPdChunk);
      pd_chunks[idx / kPdChunk].store(chunk, std::memory_order_release);
    }
    // Constructed when first handed out, not the whole chunk at once (its
    // pages stay untouched until used: 26 pages at every process start).
    // Only descriptors handed out are ever reached (slot words, netpoll
    // tags, the fork reset below pd_next), and they stay type-stable.
    pd = new (chunk + idx % kPdChunk) PollDesc();
    pd->idx = idx;
    pd_next++;
  }
  live_descs.fetch_add(1, std::memory_order_relaxed);
  return pd;
}

void pd_dealloc(PollDesc* pd) {
  live_descs.fetch_sub(1, std::memory_order_relaxed);
  ArenaGuard g;
  pd->freelink = pd_freelist;
  pd_freelist = pd;
}

FileRec* file_alloc(FdKind kind, uint32_t flags) {
  FileRec* f;
  {
    ArenaGuard g;
    f = file_freelist;
    if (f) {
      file_freelist = f->freelink;
    } else {
      if (file_chunk_left == 0) {
        file_chunk = (FileRec*)map_chunk(sizeof(FileRec) * kFileChunk);
        file_chunk_left = kFileChunk;
      }
      f = new (file_chunk++) FileRec();
      file_chunk_left--;
    }
  }
  f->freelink = nullptr;
  f->kind = kind;
  f->flags.store(flags, std::memory_order_relaxed);
  f->rcvtimeo.store(0, std::memory_order_relaxed);
  f->sndtimeo.store(0, std::memory_order_relaxed);
  f->chan.store(0, std::memory_order_relaxed);
  f->rpd.store(nullptr, std::memory_order_relaxed);
  f->peer = nullptr;
  f->peer_gen = 0;
  f->epoch = g_fork_epoch.load(std::memory_order_relaxed);
  f->refs.store(1, std::memory_order_release);
  return f;
}

void file_put(FileRec* f) {
  if (!f || f->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  f->gen.fetch_add(1, std::memory_order_release);  // stale peers stop matching
  f->rpd.store(nullptr, std::memory_order_relaxed);
  f->peer = nullptr;
  ArenaGuard g;
  f->freelink = file_freelist;
  file_freelist = f;
}

// ---- slots ----------------------------------------------------------------------------

constexpr int kSlotBits = 12;
constexpr int kSlotChunk = 1 << kSlotBits;
constexpr int kMaxFd = 1 << 22;

using Slot = std::atomic<uint64_t>;
constexpr uint32_t kEmpty = 0;
constexpr uint32_t kClosing = 1;
inline uint32_t st_of(uint64_t w) { return (uint32_t)w; }
inline uint32_t st_pd(const PollDesc* pd) { return pd->idx + 2; }
// The word that follows w with state st (the generation moves on).
inline uint64_t next_word(uint64_t w, uint32_t st) { return ((w >> 32) + 1) << 32 | st; }

std::atomic<Slot*> slot_chunks[kMaxFd >> kSlotBits];

Slot* slot_of(int fd, bool create) {
  if (fd < 0 || fd >= kMaxFd) return nullptr;
  std::atomic<Slot*>& c = slot_chunks[fd >> kSlotBits];
  Slot* chunk = c.load(std::memory_order_acquire);
  if (!chunk) {
    if (!create) return nullptr;
    auto* fresh = (Slot*)map_chunk(sizeof(Slot) * kSlotChunk);
    if (c.compare_exchange_strong(chunk, fresh, std::memory_order_acq_rel)) {
      chunk = fresh;
    } else {
      sys::munmap(fresh, sizeof(Slot) * kSlotChunk);
    }
  }
  return &chunk[fd & (kSlotChunk - 1)];
}

// The live descriptor a slot state names (st >= 2).
PollDesc* pd_of(uint32_t st);

// A reference being taken on a descriptor found in a slot is tentative
// until the slot is checked again: if a close began in between, the taker
// drops it. Close must not count such a reference as an operation in
// flight (it would keep the file open under a hidden number for nobody:
// a pipe would accept a write no reader will ever see), so it waits for
// the tentative ones to settle (a few instructions, never a wait) before
// it counts references.
struct TentRef {
  PollDesc* pd;
  explicit TentRef(PollDesc* p) : pd(p) { pd->tent.fetch_add(1, std::memory_order_seq_cst); }
  ~TentRef() { pd->tent.fetch_sub(1, std::memory_order_release); }
  TentRef(const TentRef&) = delete;
  TentRef& operator=(const TentRef&) = delete;
};

// Lets another thread finish a short step close is waiting for.
void close_spin() {
  if (fd_user_g())
    gosched();
  else
    sys::sched_yield();
}

bool ref_inc_not_zero(PollDesc* pd) {
  int32_t r = pd->refs.load(std::memory_order_relaxed);
  while (r > 0) {
    if (pd->refs.compare_exchange_weak(r, r + 1, std::memory_order_seq_cst)) return true;
  }
  return false;
}

// The hidden numbers of orphaned descriptors live high in the fd space.
int hidden_base() {
  struct rlimit rl;
  if (sys::raw4(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, (long)&rl) < 0) return 1024;
  long cur = rl.rlim_cur > (rlim_t)kMaxFd ? kMaxFd : (long)rl.rlim_cur;
  return (int)(cur > 64 ? cur - cur / 8 : cur / 2);
}

// Frees a descriptor whose last reference is gone.
void pd_free(PollDesc* pd) {
  FileRec* f;
  {
    PdGuard g(pd->lock);
    GOSHIM_CHECK(!pd->rq_head && !pd->wq_head, "fd table: freeing a descriptor with waiters");
    // The generation changes before anything else: a lock-free reader
    // (fd_lookup) that sees any of the changes below fails pd_still, and
    // stale epoll events stop matching.
    pd->seq.fetch_add(1, std::memory_order_acq_rel);
    int h = pd->fd.load(std::memory_order_relaxed);
    if (h >= 0 && pd->closing) {
      // Orphaned by close: the hidden number is ours to close.
      if (pd->registered) netpoll_unregister(h);
      sys::close(h);
    }
    pd->fd.store(-1, std::memory_order_relaxed);
    pd->registered = false;
    pd->unpollable = false;
    pd->closing = false;
    f = pd->file;
    pd->file = nullptr;
    if (f) {
      PollDesc* me = pd;
      f->rpd.compare_exchange_strong(me, nullptr, std::memory_order_relaxed);
    }
  }
  file_put(f);
  pd_dealloc(pd);
}

// The kernel has just handed out fd (open, socket, accept, dup...): the
// slot gets state st (a new descriptor, or kEmpty: classify on first use)
// whatever it held, with a new generation. A close of the number's previous
// file still under way (kClosing) then fails its fd_close_end CAS, and a
// classification begun before fails its install CAS. A stale descriptor
// (its file was closed behind goshim's back) is retired.
void replace_slot(int fd, uint32_t st) {
  Slot* s = slot_of(fd, true);
  if (!s) return;
  uint64_t w = s->load(std::memory_order_relaxed);
  while (!s->compare_exchange_weak(w, next_word(w, st), std::memory_order_seq_cst)) {
  }
  if (st_of(w) >= 2) {
    PollDesc* old = pd_of(st_of(w));
    // Closed behind goshim's back (inside libc): the number now names
    // another file, so neither unregister nor close it.
    {
      PdGuard g(old->lock);
      old->closing = true;
      old->fd.store(-1, std::memory_order_relaxed);
      old->registered = false;
    }
    pd_put(old);
  }
}

// Publishes pd (refs == 1) in fd's slot.
void install(int fd, PollDesc* pd) { replace_slot(fd, st_pd(pd)); }

int64_t tv_ns(const struct timeval& tv) { return (int64_t)tv.tv_sec * 1000000000 + tv.tv_usec * 1000; }

// Classifies an fd goshim has not seen created.
FileRec* classify(int fd, long* err) {
  struct stat st;
  long r = sys::fstat(fd, &st);
  if (r < 0) {
    *err = r;
    return nullptr;
  }
  long fl = sys::fcntl(fd, F_GETFL, 0);
  uint32_t flags = (fl >= 0 && (fl & O_NONBLOCK)) ? (uint32_t)kFileUserNonblock : 0u;
  FdKind kind = FdKind::Other;
  switch (st.st_mode & S_IFMT) {
    case S_IFSOCK:
      kind = FdKind::Socket;
      break;
    case S_IFIFO:
      kind = FdKind::Pipe;
      break;
    case S_IFREG:
    case S_IFDIR:
    case S_IFBLK:
      kind = FdKind::File;
      break;
    case S_IFCHR: {
      struct termios t;
      kind = sys::ioctl(fd, TCGETS, (long)&t) == 0 ? FdKind::Tty : FdKind::Other;
      break;
    }
    default: {
      char buf[64];
      long n = sys::readlink_fd(fd, buf, sizeof buf - 1);
      if (n > 0) {
        buf[n] = 0;
        if (strstr(buf, "[eventfd]"))
          kind = FdKind::EventFd;
        else if (strstr(buf, "[timerfd]"))
          kind = FdKind::TimerFd;
        else if (strstr(buf, "[signalfd]"))
          kind = FdKind::SignalFd;
        else if (strstr(buf, "[eventpoll]"))
          kind = FdKind::Epoll;
      }
    }
  }
  if (kind != FdKind::File) flags |= kFilePollable;
  FileRec* f = file_alloc(kind, flags);
  if (kind == FdKind::Socket) {
    struct timeval tv;
    socklen_t len = sizeof tv;
    if (sys::getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) == 0)
      f->rcvtimeo.store(tv_ns(tv), std::memory_order_relaxed);
    len = sizeof tv;
    if (sys::getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) == 0)
      f->sndtimeo.store(tv_ns(tv), std::memory_order_relaxed);
  }
  return f;
}

PollDesc* new_desc(int fd, FileRec* f) {
  PollDesc* pd = pd_alloc();
  pd->fd.store(fd, std::memory_order_relaxed);
  pd->file = f;
  pd->registered = false;
  pd->unpollable = false;
  pd->closing = false;
  pd->nhandoff.store(0, std::memory_order_relaxed);
  pd->refs.store(1, std::memory_order_release);  // the slot's
  return pd;
}

void chan_bump(FileRec* f) { file_chan_bump(f); }

// exec: the fds fd_before_exec switched to blocking (fd_exec_failed undoes).
constexpr int kExecFixMax = 256;
int exec_fix[kExecFixMax];
int exec_nfix = 0;

// Opens fd's pipe again, through /proc/self/fd, as a new open file
// description with the flags fl (F_GETFL) minus O_NONBLOCK. Returns the new
// fd (O_CLOEXEC) or -errno. Packet-mode pipes (O_DIRECT) and O_ASYNC ones
// are not reopened; neither is a write end without readers (ENXIO). No
// allocation, no lock: used before exec.
long pipe_reopen_blocking(int fd, long fl) {
  if (fl & (O_DIRECT | O_ASYNC)) return -EINVAL;
  char path[32];
  sys::proc_fd_path(fd, path);
  // O_NONBLOCK for the open itself: a FIFO open must not wait for a peer.
  long nf = sys::openat(AT_FDCWD, path, (int)(fl & O_ACCMODE) | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0);
  if (nf < 0) return nf;
  struct stat a, b;
  if (sys::fstat(fd, &a) < 0 || sys::fstat((int)nf, &b) < 0 || a.st_ino != b.st_ino ||
      a.st_dev != b.st_dev || sys::fcntl((int)nf, F_SETFL, fl & ~O_NONBLOCK) < 0) {
    sys::close((int)nf);
    return -EINVAL;
  }
  return nf;
}

bool atfork_installed = false;
std::atomic<int> atfork_once{0};

void atfork_prepare() { fd_note_fork(); }

}  // namespace

// ---- lookup ----------------------------------------------------------------------------

PollDesc* pd_at(uint32_t idx) {
  if (idx >= kPdChunk * kPdChunks) return nullptr;
  PollDesc* chunk = pd_chunks[idx / kPdChunk].load(std::memory_order_acquire);
  return chunk ? chunk + idx % kPdChunk : nullptr;
}

namespace {
PollDesc* pd_of(uint32_t st) { return pd_at(st - 2); }
}  // namespace

void file_chan_bump(FileRec* f) {
  uint64_t o = f->chan.load(std::memory_order_relaxed);
  while (!f->chan.compare_exchange_weak(o, (o + 2) | 1, std::memory_order_acq_rel)) {
  }
}

const char* fd_kind_name(FdKind k) {
  static const char* const names[] = {"unknown", "socket", "pipe",  "eventfd", "timerfd",
                                      "signalfd", "tty",   "epoll", "file",    "other"};
  return (size_t)k < sizeof names / sizeof names[0] ? names[(size_t)k] : "?";
}

namespace {

// A lookup found fd's slot "closing": the number is closed, or still the
// old file (the kernel's close has not run yet: using it would read a file
// goshim keeps O_NONBLOCK underneath as the program's blocking one), or
// already a new file the kernel handed out behind goshim's back. A
// goroutine waits for the close to finish (yielding: the closer may need
// this processor), then looks again, as a call made after the close. Off
// a goroutine (a signal handler may have interrupted the closer itself)
// the caller gets kFdUntracked and asks the kernel.
bool closing_wait() {
  if (!fd_user_g()) return false;
  gosched();
  return true;
}

// fd_get, also returning the slot word the descriptor was found under.
PollDesc* get_word(int fd, int* err, uint64_t* word) {
  if (fd < 0) {
    *err = -EBADF;
    return nullptr;
  }
  if (fd >= kMaxFd) {
    *err = kFdUntracked;
    return nullptr;
  }
  Slot* s = slot_of(fd, true);
  int creating_waits = 0;
  for (;;) {
    uint64_t w = s->load(std::memory_order_acquire);
    uint32_t st = st_of(w);
    if (st == kClosing) {
      if (closing_wait()) continue;
      *err = kFdUntracked;
      return nullptr;
    }
    if (st == kEmpty) {
      long e = 0;
      FileRec* f = classify(fd, &e);
      if (!f) {
        *err = (int)e;
        return nullptr;
      }
      if ((f->flags.load(std::memory_order_relaxed) & kFileUserNonblock) &&
          g_fd_creating.load(std::memory_order_seq_cst) != 0 &&
          (fd_user_g() || creating_waits++ < 1000)) {
        // Maybe a file goshim is creating, not yet recorded: its
        // O_NONBLOCK is goshim's, not the program's (fd_creating_begin).
        // Creators never wait between their system call and their record,
        // so this ends; off a goroutine (perhaps a signal handler that
        // interrupted the creator) only a bounded number of times.
        file_put(f);
        close_spin();
        continue;
      }
      PollDesc* fresh = new_desc(fd, f);
      // Recorded only if nothing happened to the number since w was read
      // (no close began, no creation recorded): then what classify saw is
      // the number's current file.
      if (!s->compare_exchange_strong(w, next_word(w, st_pd(fresh)), std::memory_order_seq_cst)) {
        fresh->refs.store(0, std::memory_order_relaxed);
        pd_free(fresh);
      }
      continue;
    }
    PollDesc* pd = pd_of(st);
    TentRef t(pd);
    if (!ref_inc_not_zero(pd)) continue;  // being freed: reload
    if (s->load(std::memory_order_seq_cst) != w) {
      pd_put(pd);
      continue;
    }
    *word = w;
    return pd;
  }
}

}  // namespace

PollDesc* fd_get(int fd, int* err) {
  uint64_t w;
  return get_word(fd, err, &w);
}

PollDesc* fd_lookup(int fd, uint32_t* seq, int* err) {
  Slot* s = slot_of(fd, false);
  for (;;) {
    uint64_t w = s ? s->load(std::memory_order_acquire) : 0;
    uint32_t st = st_of(w);
    if (st == kClosing) {
      if (closing_wait()) continue;
      *err = kFdUntracked;
      return nullptr;
    }
    if (st == kEmpty) {
      // First sight (or out of range): classify and record, with a reference.
      PollDesc* pd = fd_get(fd, err);
      if (!pd) return nullptr;
      *seq = pd->seq.load(std::memory_order_acquire);
      pd_put(pd);
      return pd;
    }
    PollDesc* pd = pd_of(st);
    uint32_t q = pd->seq.load(std::memory_order_acquire);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s->load(std::memory_order_relaxed) != w) continue;  // replaced meanwhile
    *seq = q;
    return pd;
  }
}

bool pd_hold(PollDesc* pd, int fd, uint32_t seq) {
  TentRef t(pd);
  if (!ref_inc_not_zero(pd)) return false;
  Slot* s = slot_of(fd, false);
  // seq_cst: pairs with fd_close_begin's slot store and refs load.
  if (!s || st_of(s->load(std::memory_order_seq_cst)) != st_pd(pd) ||
      pd->seq.load(std::memory_order_relaxed) != seq) {
    pd_put(pd);
    return false;
  }
  return true;
}

void pd_put(PollDesc* pd) {
  if (pd->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) pd_free(pd);
}

PollDesc* fd_peek(int fd) {
  Slot* s = slot_of(fd, false);
  if (!s) return nullptr;
  uint32_t st = st_of(s->load(std::memory_order_acquire));
  return st >= 2 ? pd_of(st) : nullptr;
}

// ---- numbers in use ------------------------------------------------------------------------

int pd_num_enter(PollDesc* pd, int fd, bool* counted) {
  pd->inuse.fetch_add(1, std::memory_order_seq_cst);
  int n = pd->fd.load(std::memory_order_seq_cst);
  *counted = n == fd;
  // Otherwise the hidden number (it lives as long as the caller's
  // reference) or -1: nothing for close to wait for.
  if (!*counted) pd->inuse.fetch_sub(1, std::memory_order_release);
  return n;
}

void pd_num_exit(PollDesc* pd, bool counted) {
  if (counted) pd->inuse.fetch_sub(1, std::memory_order_release);
}

long fd_private_copy(PollDesc* pd, int fd) {
  bool counted;
  int n = pd_num_enter(pd, fd, &counted);
  long c = n >= 0 ? sys::fcntl(n, F_DUPFD_CLOEXEC, hidden_base()) : -EBADF;
  pd_num_exit(pd, counted);
  return c;
}

// ---- creation ----------------------------------------------------------------------------

FileRec* fd_new(int fd, FdKind kind, uint32_t flags) {
  FileRec* f = file_alloc(kind, flags);
  if (fd < 0 || fd >= kMaxFd) {
    file_put(f);
    return nullptr;
  }
  install(fd, new_desc(fd, f));
  return f;
}

void fd_forget(int fd) {
  if (fd < 0 || fd >= kMaxFd) return;
  replace_slot(fd, kEmpty);
}

void fd_link(int from, int to) {
  int err;
  PollDesc* a = fd_get(from, &err);
  if (!a) return;
  PollDesc* b = fd_get(to, &err);
  if (b) {
    FileRec* fa = a->file;
    FileRec* fb = b->file;
    fb->chan.store(0, std::memory_order_relaxed);  // a new pipe is empty
    fb->rpd.store(b, std::memory_order_release);
    fb->flags.fetch_or(kFileChan, std::memory_order_release);
    fa->peer_gen = fb->gen.load(std::memory_order_relaxed);
    __atomic_store_n(&fa->peer, fb, __ATOMIC_RELEASE);
    pd_put(b);
  }
  pd_put(a);
}

FdDupSrc fd_dup_begin(int oldfd) {
  FdDupSrc d;
  int err;
  d.pd = get_word(oldfd, &err, &d.word);
  return d;
}

void fd_dup_end(const FdDupSrc& d, int oldfd, int newfd) {
  if (newfd >= 0 && newfd < kMaxFd) {
    Slot* s = d.pd ? slot_of(oldfd, false) : nullptr;
    // The kernel copied d.pd's file only if oldfd's slot did not change
    // from before the dup to now (no close of oldfd began meanwhile).
    if (s && s->load(std::memory_order_seq_cst) == d.word) {
      FileRec* f = d.pd->file;
      f->refs.fetch_add(1, std::memory_order_relaxed);
      install(newfd, new_desc(newfd, f));
    } else {
      fd_forget(newfd);  // unknown copy: classified on first use
    }
  }
  if (d.pd) pd_put(d.pd);
}

// ---- close --------------------------------------------------------------------------------

FdClose fd_close_begin(int fd) {
  FdClose c;
  Slot* s = slot_of(fd, true);
  if (!s) return c;
  uint64_t w = s->load(std::memory_order_acquire);
  do {
    // Another close of the same number is under way (the program closes
    // it twice at once): that one owns the slot.
    if (st_of(w) == kClosing) return c;
  } while (!s->compare_exchange_weak(w, next_word(w, kClosing), std::memory_order_seq_cst));
  c.word = next_word(w, kClosing);
  if (st_of(w) == kEmpty) return c;
  PollDesc* pd = pd_of(st_of(w));
  c.pd = pd;
  bool lost = false;
  bool moved = false;
  // References taken before the slot changed and not yet checked against
  // it: each either sees the close and drops its reference, or checked
  // before and holds one. Once none is pending, refs - 1 counts exactly the
  // operations in flight (new takers all see the close).
  while (pd->tent.load(std::memory_order_seq_cst) != 0) close_spin();
  {
    PdGuard g(pd->lock);
    pd->closing = true;
    FileRec* f = pd->file;
    PollDesc* me = pd;
    f->rpd.compare_exchange_strong(me, nullptr, std::memory_order_relaxed);
    // A reader of this pipe, or of its peer (this was a write end: EOF may
    // follow), must consult the kernel again.
    if (f->flags.load(std::memory_order_relaxed) & kFileChan) chan_bump(f);
    FileRec* peer = __atomic_load_n(&f->peer, __ATOMIC_ACQUIRE);
    if (peer) chan_bump(peer);
    if (pd->refs.load(std::memory_order_seq_cst) > 1) {
      // Operations in flight: they keep the file, under a hidden number.
      long h = sys::fcntl(fd, F_DUPFD_CLOEXEC, hidden_base());
      if (h >= 0) {
        if (pd->registered) {
          if (netpoll_register((int)h, pd_tag(pd)) < 0) pd->registered = false;
          netpoll_unregister(fd);
        }
        sc_store(pd->fd, (int)h);
        moved = true;
      } else {
        // Out of numbers: the operations fail with EBADF instead.
        lost = true;
      }
    }
    if (pd->fd.load(std::memory_order_relaxed) == fd) {
      if (pd->registered) netpoll_unregister(fd);
      pd->registered = false;
      sc_store(pd->fd, -1);
    }
  }
  if (moved || lost) {
    // An operation that read the number fd before the store above may be
    // about to use it in a system call (pd_num_enter): the kernel must not
    // free fd (and give it to another file) before that call is over.
    // Those calls do not block (the file is O_NONBLOCK underneath) and no
    // new one can start on fd, so this wait is short and bounded.
    while (pd->inuse.load(std::memory_order_seq_cst) != 0) close_spin();
  }
  if (lost) pd_wake_all(pd);
  return c;
}

void fd_close_end(int fd, const FdClose& c) {
  Slot* s = slot_of(fd, false);
  if (s && c.word) {
    // Unknown again, unless a creation recorded the number meanwhile.
    uint64_t w = c.word;
    s->compare_exchange_strong(w, next_word(w, kEmpty), std::memory_order_seq_cst);
  }
  if (c.pd) pd_put(c.pd);
}

FdKind pd_kind(PollDesc* pd) { return pd && pd->file ? pd->file->kind : FdKind::Unknown; }

// ---- views ----------------------------------------------------------------------------------

bool fd_emulates_blocking(int fd) {
  PollDesc* pd = fd_peek(fd);
  if (!pd) return false;
  FileRec* f = pd->file;
  if (!f) return false;
  uint32_t fl = f->flags.load(std::memory_order_acquire);
  return (fl & kFileNbUnder) && !(fl & kFileUserNonblock);
}

void fd_set_user_nonblock(PollDesc* pd, bool on) {
  if (on)
    pd->file->flags.fetch_or(kFileUserNonblock, std::memory_order_acq_rel);
  else
    pd->file->flags.fetch_and(~kFileUserNonblock, std::memory_order_acq_rel);
}

bool fd_make_nonblocking(PollDesc* pd, int fd) {
  FileRec* f = pd->file;
  uint32_t fl = f->flags.load(std::memory_order_acquire);
  if (fl & kFileNbUnder) return true;
  if (!(fl & kFileOwned) || !(fl & kFilePollable)) return false;
  bool counted;
  int n = pd_num_enter(pd, fd, &counted);
  bool ok = false;
  long k = n >= 0 ? sys::fcntl(n, F_GETFL, 0) : -EBADF;
  if (k >= 0 && ((k & O_NONBLOCK) || sys::fcntl(n, F_SETFL, k | O_NONBLOCK) >= 0)) {
    f->flags.fetch_or(kFileNbUnder, std::memory_order_acq_rel);
    ok = true;
  }
  pd_num_exit(pd, counted);
  return ok;
}

void fd_release_to_kernel(int fd) {
  int err;
  PollDesc* pd = fd_get(fd, &err);
  if (!pd) return;
  FileRec* f = pd->file;
  uint32_t fl = f->flags.load(std::memory_order_acquire);
  if ((fl & kFileNbUnder) && !(fl & kFileUserNonblock)) {
    long k = sys::fcntl(fd, F_GETFL, 0);
    if (k >= 0 && f->kind == FdKind::Pipe && fork_is_child()) {
      // A fork child: the description is shared with the parent, which
      // goes on relying on O_NONBLOCK. The pipe gets a blocking
      // description of its own here instead, and the number a fresh
      // record (classified on first use: not goshim's to switch).
      long fdfl = sys::fcntl(fd, F_GETFD, 0);
      long nf = fdfl >= 0 ? pipe_reopen_blocking(fd, k) : -1;
      if (nf >= 0) {
        pd_put(pd);
        fd_taint(fd);
        FdClose old = fd_close_begin(fd);
        sys::dup3((int)nf, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
        fd_close_end(fd, old);
        sys::close((int)nf);
        return;
      }
    }
    if (k >= 0) sys::fcntl(fd, F_SETFL, k & ~O_NONBLOCK);
  }
  f->flags.fetch_and(~(kFileNbUnder | kFileOwned), std::memory_order_acq_rel);
  pd_put(pd);
  fd_taint(fd);
}

void fd_taint(int fd) {
  int err;
  PollDesc* pd = fd_get(fd, &err);
  if (!pd) return;
  FileRec* f = pd->file;
  f->flags.fetch_or(kFileTainted, std::memory_order_acq_rel);
  chan_bump(f);
  FileRec* peer = __atomic_load_n(&f->peer, __ATOMIC_ACQUIRE);
  if (peer && peer->gen.load(std::memory_order_acquire) == f->peer_gen) {
    peer->flags.fetch_or(kFileTainted, std::memory_order_acq_rel);
    chan_bump(peer);
  }
  pd_put(pd);
}

// ---- process events ---------------------------------------------------------------------------

void fd_note_fork() { g_fork_epoch.fetch_add(1, std::memory_order_acq_rel); }

void fd_install_atfork() {
  if (atfork_once.load(std::memory_order_acquire)) return;
  int zero = 0;
  if (!atfork_once.compare_exchange_strong(zero, 1)) return;
  // The child's reset is core/fork.cpp's hook (netpoll_after_fork).
  pthread_atfork(atfork_prepare, nullptr, nullptr);
  atfork_installed = true;
}

void fd_fork_child() {
  // Only this thread exists: reset every lock and queue without locking.
  arena_lock.reset();
  g_fd_creating.store(0, std::memory_order_relaxed);
  uint32_t n = pd_next;
  for (uint32_t i = 0; i < n; i++) {
    PollDesc* pd = pd_chunks[i / kPdChunk].load(std::memory_order_relaxed) + i % kPdChunk;
    new (&pd->lock) PdLock();
    pd->rq_head = pd->rq_tail = pd->wq_head = pd->wq_tail = nullptr;
    pd->nhandoff.store(0, std::memory_order_relaxed);
    // Counts of threads that are not in the child (close would wait for them).
    pd->inuse.store(0, std::memory_order_relaxed);
    pd->tent.store(0, std::memory_order_relaxed);
    pd->registered = false;  // the child gets a fresh epoll instance
    if (pd->refs.load(std::memory_order_relaxed) > 0) {
      // Operations in flight belonged to goroutines the child does not
      // have. An orphan only lived for them: close it now.
      if (pd->closing) {
        pd->refs.store(1, std::memory_order_relaxed);
        pd_put(pd);
      } else {
        pd->refs.store(1, std::memory_order_relaxed);
      }
    }
  }
  for (int c = 0; c < (kMaxFd >> kSlotBits); c++) {
    Slot* chunk = slot_chunks[c].load(std::memory_order_relaxed);
    if (!chunk) continue;
    for (int i = 0; i < kSlotChunk; i++) {
      uint64_t w = chunk[i].load(std::memory_order_relaxed);
      if (st_of(w) == kClosing) chunk[i].store(next_word(w, kEmpty), std::memory_order_relaxed);
    }
  }
}

// Calls fn(fd, pd) for every live record that wanted(pd) accepts (checked
// first: it costs no system call) and whose fd a child would inherit (not
// FD_CLOEXEC). No allocation, no lock (fd_before_exec runs before exec in
// fork children).
template <typename W, typename F>
void each_inheritable(W wanted, F fn) {
  for (int c = 0; c < (kMaxFd >> kSlotBits); c++) {
    Slot* chunk = slot_chunks[c].load(std::memory_order_acquire);
    if (!chunk) continue;
    for (int i = 0; i < kSlotChunk; i++) {
      uint32_t st = st_of(chunk[i].load(std::memory_order_acquire));
      if (st < 2) continue;
      PollDesc* pd = pd_of(st);
      if (!wanted(pd)) continue;
      int fd = (c << kSlotBits) | i;
      long fdfl = sys::fcntl(fd, F_GETFD, 0);
      if (fdfl < 0 || (fdfl & FD_CLOEXEC)) continue;
      fn(fd, pd);
    }
  }
}

void fd_prepare_spawn() {
  fd_note_fork();
  each_inheritable([](PollDesc*) { return true; }, [](int fd, PollDesc*) { fd_release_to_kernel(fd); });
}

void fd_before_exec() {
  exec_nfix = 0;
  // Files goshim switched to O_NONBLOCK behind the program's back.
  auto switched = [](PollDesc* pd) {
    FileRec* f = __atomic_load_n(&pd->file, __ATOMIC_ACQUIRE);  // type-stable memory
    if (!f) return false;
    uint32_t fl = f->flags.load(std::memory_order_acquire);
    return (fl & kFileNbUnder) && !(fl & kFileUserNonblock);
  };
  each_inheritable(switched, [](int fd, PollDesc* pd) {
    FileRec* f = __atomic_load_n(&pd->file, __ATOMIC_ACQUIRE);
    long k = sys::fcntl(fd, F_GETFL, 0);
    if (k < 0 || !(k & O_NONBLOCK)) return;
    long nf = f->kind == FdKind::Pipe ? pipe_reopen_blocking(fd, k) : -1;
    if (nf >= 0) {
      long r = sys::dup3((int)nf, fd, 0);
      sys::close((int)nf);
      if (r < 0) sys::fcntl(fd, F_SETFL, k & ~O_NONBLOCK);
    } else {
      sys::fcntl(fd, F_SETFL, k & ~O_NONBLOCK);  // shared with whoever shares it
    }
    if (exec_nfix < kExecFixMax) exec_fix[exec_nfix++] = fd;
  });
}

void fd_exec_failed() {
  // The numbers still name the same pipes and sockets; goshim's records
  // expect O_NONBLOCK underneath again.
  for (int i = 0; i < exec_nfix; i++) {
    long k = sys::fcntl(exec_fix[i], F_GETFL, 0);
    if (k >= 0) sys::fcntl(exec_fix[i], F_SETFL, k | O_NONBLOCK);
  }
  exec_nfix = 0;
}

int fd_next_tracked(int from) {
  if (from < 0) from = 0;
  for (int fd = from; fd < kMaxFd;) {
    Slot* chunk = slot_chunks[fd >> kSlotBits].load(std::memory_order_acquire);
    if (!chunk) {
      fd = ((fd >> kSlotBits) + 1) << kSlotBits;
      continue;
    }
    if (st_of(chunk[fd & (kSlotChunk - 1)].load(std::memory_order_acquire)) >= 2) return fd;
    fd++;
  }
  return -1;
}

int32_t fd_live_descs() { return live_descs.load(std::memory_order_relaxed); }

}  // namespace goshim
