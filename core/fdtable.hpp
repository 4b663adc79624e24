// The fd table: goshim's view of the process's file descriptors, indexed
// by fd number (DESIGN.md decision 5).
//
// Two records describe an fd, mirroring the kernel's split:
//
//   fd number --slot--> PollDesc (netpoll.hpp)   one per fd number: its epoll
//                         |                       registration and its waiters
//                         v
//                       FileRec                   one per open file description,
//                                                 shared by dup'd numbers: kind,
//                                                 the program's O_NONBLOCK view,
//                                                 SO_RCVTIMEO/SO_SNDTIMEO, and the
//                                                 same-process pipe/socketpair link
//
// Pollable files goshim created itself (socket, accept, pipe, socketpair,
// eventfd, timerfd, signalfd) are kept O_NONBLOCK underneath (kFileNbUnder)
// while the program sees its own view (kFileUserNonblock) through fcntl
// and ioctl. Files the process inherited or that were created behind
// goshim's back (libc-internal calls) are classified on first use and never
// switched: changing O_NONBLOCK on a description shared with another
// process (a shell's terminal) would break that process, so blocking calls
// on them wait for readiness in netpoll and then run as blocking calls.
//
// Lifetime. A PollDesc holds one reference for its fd-table slot and one
// per operation in flight (fd_get .. pd_put). close(fd) detaches the slot
// at once, so the number can be reused as soon as close returns; if
// operations are in flight on it (goroutines parked in read, accept,
// poll...), they keep the file open under a hidden duplicate number, the
// way a thread blocked in the kernel keeps its struct file: like on Linux,
// closing an fd does not wake a thread blocked on it, which goes on waiting
// on the file and gets its data (or its EOF after shutdown). The last
// operation out closes the hidden number.
//
// Numbers and the kernel. The kernel may give a number to a new file the
// moment its close (or the dup2/dup3 onto it) is done, to any thread, so
// the table never answers for a number from what it knew of an earlier
// file. Each fd-table slot is one word: (generation, state), the state
// being "unknown", "closing" or a descriptor; every change of a slot
// increments its generation. The invariant:
//
//   the slot of fd names a descriptor only if no close of fd began since
//   that descriptor's file was seen at fd.
//
// It holds because
//   - close marks the slot "closing" (a compare-and-swap) BEFORE the
//     kernel's close, and only a compare-and-swap from that very word
//     makes it "unknown" again afterwards (fd_close_begin/fd_close_end);
//   - a number the kernel has just handed out (open, socket, accept, pipe,
//     dup...) is recorded unconditionally, with a new generation (fd_new,
//     fd_forget, fd_dup_end): a close of the number's previous file that
//     is still finishing then fails its compare-and-swap, and cannot clear
//     or misname the new record;
//   - first-use classification records its result with a compare-and-swap
//     from the word it read before asking the kernel (fstat...): if a close
//     began or a creation was recorded in between, the result is dropped.
//     A file goshim creates O_NONBLOCK underneath is at its number before
//     its creator records it; while such a creation is under way
//     (FdCreating) a classification that sees O_NONBLOCK looks again;
//   - a copy (dup, dup2, dup3, F_DUPFD) shares the source's record only if
//     the source's slot word is the same before and after the kernel's dup
//     (fd_dup_begin/fd_dup_end); otherwise the copy is "unknown";
//   - while a slot is "closing", a lookup on a goroutine yields until the
//     close is over and looks again (as a call made after the close);
//     elsewhere it returns kFdUntracked and the caller asks the kernel
//     directly (the number may already be a new file made behind goshim's
//     back). It is never EBADF from the table.
// An operation that must wait holds its descriptor (pd_hold); close then
// moves the file to a hidden number (PollDesc::fd) and the operation's
// system calls use that. Close counts holders only after every reference
// taken before its slot change has been checked against the slot
// (PollDesc::tent): a reference that is about to fail never keeps a file
// open under a hidden number. A system call on the program's number by a
// holder is bracketed by pd_num_enter/pd_num_exit, and close waits for
// those brackets (short, non-blocking calls) before the kernel frees the
// number, so a holder never reaches a file that replaced its own; a holder
// that must block in the kernel does so on a private copy of the number
// (fd_private_copy), which close does not wait for. Operations that hold
// nothing use the program's number, exactly like a native call racing
// with close. Not covered: numbers closed and reused entirely inside libc
// (fclose, then fopen) keep the old record until goshim sees a creation.
//
// Locks: the descriptor lock (rank pollDesc) guards a PollDesc's queues,
// registration and fd; the arena lock (leaf) guards the free lists. Records
// live in mmap'd chunks that are never unmapped (type-stable), so a stale
// pointer is always safe to read; PollDesc::seq and FileRec::gen tell
// whether it still means the same thing.
#pragma once

#include <errno.h>
#include <stdint.h>

#include <atomic>

#include "core/gmp.hpp"
#include "core/netpoll.hpp"

namespace goshim {

enum class FdKind : uint8_t {
  Unknown = 0,
  Socket,
  Pipe,      // pipe or FIFO
  EventFd,
  TimerFd,
  SignalFd,
  Tty,
  Epoll,     // an epoll instance of the program's (itself pollable)
  File,      // regular file, directory, block device: never EAGAIN, may block
  Other,     // anything else (character devices, anon inodes of unknown origin)
};
const char* fd_kind_name(FdKind k);

// FileRec::flags
enum : uint32_t {
  kFileUserNonblock = 1u << 0,  // the program's own O_NONBLOCK view
  kFileNbUnder = 1u << 1,       // goshim set O_NONBLOCK on the description
  kFileOwned = 1u << 2,         // created in this process: O_NONBLOCK is ours to set
  kFilePollable = 1u << 3,      // epoll can watch it
  kFileStream = 1u << 4,        // byte stream (pipe, SOCK_STREAM): blocking writes complete
  kFileUnix = 1u << 5,          // AF_UNIX socket
  kFileChan = 1u << 6,          // data into it comes from a same-process peer (FileRec::chan)
  kFileTainted = 1u << 7,       // data may reach it by routes goshim cannot see: no handoff
};

// An open file description as goshim sees it.
struct FileRec {
  std::atomic<int32_t> refs{0};  // PollDescs (fd numbers) sharing it; 0 = free
  std::atomic<uint32_t> gen{0};  // changes when the record is freed
  FdKind kind = FdKind::Unknown;
  std::atomic<uint32_t> flags{0};
  std::atomic<int64_t> rcvtimeo{0};  // SO_RCVTIMEO in ns (0: none)
  std::atomic<int64_t> sndtimeo{0};  // SO_SNDTIMEO in ns
  // Same-process pipes and stream socketpairs (fdio.cpp): the channel of
  // data flowing INTO this file. chan bit 0 = "the kernel buffer may hold
  // data"; every write into it that reaches the kernel changes the value
  // (generation in the upper bits), and a reader that saw EAGAIN clears
  // bit 0 with a CAS from the value it read before the attempt.
  std::atomic<uint64_t> chan{0};
  std::atomic<PollDesc*> rpd{nullptr};  // descriptor a writer hands off to (the reading end's)
  FileRec* peer = nullptr;              // where this file's writes arrive (same process)
  uint32_t peer_gen = 0;                // peer->gen when linked
  uint32_t epoch = 0;                   // fd_fork_epoch() when created
  FileRec* freelink = nullptr;
};

// ---- lookup -------------------------------------------------------------------

// Lookups that return nullptr set *err to -EBADF (the kernel says fd is not
// open), another -errno of the classification, or kFdUntracked: goshim has
// no record to offer (fd lies beyond the table, or, off a goroutine, a
// close of it is under way and the kernel may have reused it): callers
// pass the call to the kernel as it is. On a goroutine, lookups of a
// number being closed yield until the close is over.
constexpr int kFdUntracked = -EMFILE;

// Any thread. The descriptor of fd with a reference held (drop it with
// pd_put), classifying an fd seen for the first time.
PollDesc* fd_get(int fd, int* err);
// Any thread. Drops a reference; the last one frees the descriptor (and
// closes its hidden number if it was orphaned by close).
void pd_put(PollDesc* pd);
// Any thread. The descriptor of fd WITHOUT a reference, classifying an fd
// seen for the first time (errors as fd_get). *seq receives its
// generation: what is read from the descriptor afterwards describes fd
// only if pd_still(pd, *seq) holds after the reads (seqlock style; the
// memory is type-stable, so the reads themselves are always safe). An
// operation that will wait takes a reference first, with pd_hold. This is
// the I/O fast path: no atomic read-modify-write.
PollDesc* fd_lookup(int fd, uint32_t* seq, int* err);
// Takes a reference on pd if it is still fd's descriptor of generation
// seq (false: fd was closed meanwhile).
bool pd_hold(PollDesc* pd, int fd, uint32_t seq);
inline bool pd_still(const PollDesc* pd, uint32_t seq) {
  std::atomic_thread_fence(std::memory_order_acquire);  // the reads before, then the check
  return pd->seq.load(std::memory_order_relaxed) == seq;
}

// Any thread. The descriptor currently in fd's slot, without a reference
// and without classifying (racy: for hints only, e.g. fcntl views).
PollDesc* fd_peek(int fd);

// A holder of pd (a reference taken with pd_hold or fd_get on the
// program's number fd) about to make a system call on pd's file: returns
// the number to use (fd, the hidden number after a close, or -1) and
// whether the call is counted; pd_num_exit(pd, counted) after the call.
// Only for calls that do not block (close waits for counted ones).
int pd_num_enter(PollDesc* pd, int fd, bool* counted);
void pd_num_exit(PollDesc* pd, bool counted);
// A holder that must block in the kernel: a private duplicate of pd's
// file (close it after the call), or -errno.
long fd_private_copy(PollDesc* pd, int fd);

// ---- creation -------------------------------------------------------------------

// Creations of files goshim keeps O_NONBLOCK underneath while the program
// sees them blocking, between the kernel's call and fd_new: such a file is
// already at its number with an O_NONBLOCK the program did not ask for, so
// a first-use classification that sees O_NONBLOCK while one is under way
// waits and looks again (the creator's record replaces the slot).
extern std::atomic<int32_t> g_fd_creating;
inline void fd_creating_begin() { g_fd_creating.fetch_add(1, std::memory_order_seq_cst); }
inline void fd_creating_end() { g_fd_creating.fetch_sub(1, std::memory_order_release); }
struct FdCreating {
  bool on;
  explicit FdCreating(bool o) : on(o) {
    if (on) fd_creating_begin();
  }
  ~FdCreating() {
    if (on) fd_creating_end();
  }
  FdCreating(const FdCreating&) = delete;
  FdCreating& operator=(const FdCreating&) = delete;
};

// Records fd, just created by an interposed call, as a new open file
// description: kind and kFile* flags. Replaces whatever stale record held
// the number. Returns its FileRec (owned by the table). Any thread.
FileRec* fd_new(int fd, FdKind kind, uint32_t flags);
// fd was just opened by a call that does not tell its kind (open, openat):
// forgets whatever record the number had (its old file was closed behind
// goshim's back); the new file is classified on first use. Any thread.
void fd_forget(int fd);
// Links a same-process pair: writes on from arrive at to (pipe: write end
// -> read end; socketpair: both ways, call twice). Any thread.
void fd_link(int from, int to);
// dup/dup2/dup3/F_DUPFD: fd_dup_begin(oldfd) before the kernel's call,
// fd_dup_end(src, oldfd, newfd) after it (newfd < 0: the call failed).
// newfd shares oldfd's record only if oldfd's slot did not change
// meanwhile; otherwise it is classified on first use. Any thread.
struct FdDupSrc {
  PollDesc* pd = nullptr;  // with a reference
  uint64_t word = 0;       // oldfd's slot word
};
FdDupSrc fd_dup_begin(int oldfd);
void fd_dup_end(const FdDupSrc& src, int oldfd, int newfd);

// ---- close ------------------------------------------------------------------------

// Detaches fd from the table before the program's close (or dup2 onto it):
// the slot becomes "closing", its descriptor leaves epoll, and if
// operations are in flight on it they move to a hidden duplicate. Returns
// the detached descriptor (pd, nullptr if fd was not tracked) and the
// slot word. The caller closes fd in the kernel, then calls fd_close_end,
// which makes the slot "unknown" unless a creation recorded fd meanwhile.
struct FdClose {
  PollDesc* pd = nullptr;
  uint64_t word = 0;  // 0: another close of fd owns the slot
};
FdClose fd_close_begin(int fd);
void fd_close_end(int fd, const FdClose& c);
// Kind of a detached descriptor's file (to decide how to close it).
FdKind pd_kind(PollDesc* pd);

// ---- views -----------------------------------------------------------------------

// Whether goshim emulates blocking on fd (O_NONBLOCK underneath, the
// program's view blocking): callers off a goroutine must then wait with
// poll themselves. Racy hint, any thread.
bool fd_emulates_blocking(int fd);
// The program's O_NONBLOCK view changes (fcntl F_SETFL, ioctl FIONBIO).
void fd_set_user_nonblock(PollDesc* pd, bool on);
// Sets O_NONBLOCK underneath on an owned file (lazily, first blocking op).
// The caller holds pd, found at the program's number fd.
bool fd_make_nonblocking(PollDesc* pd, int fd);
// Stops keeping fd's file O_NONBLOCK underneath (it is about to be seen by
// another process, or wrapped by stdio): restores the program's view in
// the kernel and marks the file foreign. Any thread.
void fd_release_to_kernel(int fd);
// Marks fd's file as reachable by writers goshim cannot see (no handoff).
void fd_taint(int fd);
// Records that data may have reached f's kernel buffer (a write into it, a
// close of a peer, an event): readers must consult the kernel again. Every
// call changes FileRec::chan, so a reader's CAS from an older value fails.
void file_chan_bump(FileRec* f);

// ---- process events ----------------------------------------------------------------

// Incremented by fork (atfork prepare), spawn and exec hooks: pairs created
// before the last increment may have writers in other processes.
extern std::atomic<uint32_t> g_fork_epoch;
inline uint32_t fd_fork_epoch() { return g_fork_epoch.load(std::memory_order_acquire); }
void fd_note_fork();
// In a forked child, with only the forking thread alive (called by
// netpoll_after_fork): forgets every registration and waiter (the child
// gets a fresh epoll instance) and drops references held by operations of
// goroutines that do not exist here.
void fd_fork_child();
// Before posix_spawn, system or popen (the parent goes on running while
// the child shares its open file descriptions): every file that stays open
// across exec is handed back to the kernel (fd_release_to_kernel), so the
// new program sees what this one saw and goshim never sets O_NONBLOCK on it
// again. Any thread, on the parent's side.
void fd_prepare_spawn();
// Just before an exec of this process (the exec interposers; usually a
// fork child): every inheritable fd (not FD_CLOEXEC) whose file goshim
// keeps O_NONBLOCK underneath while the program sees it blocking gets a
// blocking file. A pipe gets a description of its own, reopened through
// /proc/self/fd (the parent that shares the old one keeps its mode); other
// files lose O_NONBLOCK on the shared description. No locks, no
// allocation, no table change: signal-safe, usable in a vfork-like child.
void fd_before_exec();
// The exec failed: puts back what fd_before_exec changed.
void fd_exec_failed();

// Registers the fork handlers (once, any thread, no locks held).
void fd_install_atfork();

// The lowest tracked fd >= from, or -1 (close_range, closefrom). Racy.
int fd_next_tracked(int from);

// For tests and dumps.
int32_t fd_live_descs();

}  // namespace goshim
