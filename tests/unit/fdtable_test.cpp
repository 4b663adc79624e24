// The fd table and fd operations on plain kernel threads (the test is not
// a goroutine, so blocking is emulated with the real poll): classification
// of fds goshim did not create, dup sharing the open file description,
// close with an operation in flight (the hidden duplicate), the program's
// O_NONBLOCK view, same-process pair links, and blocking reads and large
// writes on fds kept O_NONBLOCK underneath.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/fdio.hpp"
#include "core/fdops.hpp"
#include "core/fdtable.hpp"
#include "core/netpoll.hpp"
#include "core/real.hpp"
#include "syscalls/sys.hpp"
#include "syscalls/sys_io.hpp"

using namespace goshim;

namespace {

void init() {
  real::resolve();
  if (!netpoll_inited()) netpoll_init();
}

FdKind kind_of(int fd) {
  int err = 0;
  PollDesc* pd = fd_get(fd, &err);
  cr_assert_not_null(pd, "fd_get(%d): %d", fd, err);
  FdKind k = pd_kind(pd);
  pd_put(pd);
  return k;
}

uint32_t flags_of(int fd) {
  int err = 0;
  PollDesc* pd = fd_get(fd, &err);
  cr_assert_not_null(pd);
  uint32_t f = pd->file->flags.load();
  pd_put(pd);
  return f;
}

void close_fd(int fd) {
  FdClose c = fd_close_begin(fd);
  sys::close(fd);
  fd_close_end(fd, c);
}

}  // namespace

TestSuite(fdtable, .init = init, .timeout = 60);

Test(fdtable, classifies_fds_it_did_not_create) {
  int p[2];
  cr_assert_eq(sys::pipe2(p, O_NONBLOCK), 0);
  cr_assert_eq(kind_of(p[0]), FdKind::Pipe);
  uint32_t f = flags_of(p[0]);
  cr_assert(f & kFilePollable);
  cr_assert(f & kFileUserNonblock, "the kernel's O_NONBLOCK is the program's view");
  cr_assert(!(f & kFileOwned), "inherited: never switched");
  int s = (int)sys::socket(AF_UNIX, SOCK_STREAM, 0);
  cr_assert_eq(kind_of(s), FdKind::Socket);
  int e = (int)sys::eventfd2(0, 0);
  cr_assert_eq(kind_of(e), FdKind::EventFd);
  int ep = (int)sys::epoll_create1(0);
  cr_assert_eq(kind_of(ep), FdKind::Epoll);
  char path[] = "/tmp/fdtable-test-XXXXXX";
  int fd = mkstemp(path);
  unlink(path);
  cr_assert_eq(kind_of(fd), FdKind::File);
  cr_assert(!(flags_of(fd) & kFilePollable));
  int err = 0;
  cr_assert_null(fd_get(987654, &err));
  cr_assert_eq(err, -EBADF);
  cr_assert_null(fd_get(-1, &err));
  cr_assert_eq(err, -EBADF);
  for (int x : {p[0], p[1], s, e, ep, fd}) close_fd(x);
}

// The other kinds: timerfd, signalfd, a tty (pty slave), a FIFO, and a
// character device that is not a tty (other); each pollable but the
// regular file.
Test(fdtable, classifies_every_kind) {
  int t = (int)sys::raw2(SYS_timerfd_create, CLOCK_MONOTONIC, 0);
  cr_assert_eq(kind_of(t), FdKind::TimerFd);
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, SIGUSR2);
  int sfd = (int)sys::raw4(SYS_signalfd4, -1, (long)&m, 8, 0);
  cr_assert_eq(kind_of(sfd), FdKind::SignalFd);
  int nul = open("/dev/null", O_RDWR);
  cr_assert_eq(kind_of(nul), FdKind::Other);
  char fifo[64];
  snprintf(fifo, sizeof fifo, "/tmp/fdtable-fifo-%d", (int)getpid());
  unlink(fifo);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  int ff = open(fifo, O_RDWR);
  unlink(fifo);
  cr_assert_eq(kind_of(ff), FdKind::Pipe);
  for (int x : {t, sfd, nul, ff}) {
    cr_assert(flags_of(x) & kFilePollable, "fd %d", x);
    cr_assert(!(flags_of(x) & kFileOwned), "fd %d was not created by goshim", x);
  }
  int pm = posix_openpt(O_RDWR | O_NOCTTY);
  if (pm >= 0 && grantpt(pm) == 0 && unlockpt(pm) == 0) {
    int ps = open(ptsname(pm), O_RDWR | O_NOCTTY);
    cr_assert_geq(ps, 0);
    cr_assert_eq(kind_of(ps), FdKind::Tty);
    cr_assert_eq(kind_of(pm), FdKind::Tty);
    close_fd(ps);
  }
  if (pm >= 0) close_fd(pm);
  for (int x : {t, sfd, nul, ff}) close_fd(x);
}

// Created through goshim: the kind is known without asking the kernel, the
// file is goshim's to keep O_NONBLOCK underneath (owned), and the
// program's O_NONBLOCK given at creation is its view.
Test(fdtable, creation_records_kind_and_view) {
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, SIGUSR2);
  struct {
    long fd;
    FdKind kind;
    bool nb;
  } made[] = {
      {fdop_eventfd(0, EFD_NONBLOCK), FdKind::EventFd, true},
      {fdop_timerfd_create(CLOCK_MONOTONIC, 0), FdKind::TimerFd, false},
      {fdop_signalfd(-1, &m, SFD_NONBLOCK), FdKind::SignalFd, true},
      {fdop_epoll_create1(0), FdKind::Epoll, false},
      {fdop_socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0), FdKind::Socket, true},
      {fdop_socket(AF_INET, SOCK_STREAM, 0), FdKind::Socket, false},
  };
  for (auto& x : made) {
    cr_assert_geq(x.fd, 0);
    cr_assert_eq(kind_of((int)x.fd), x.kind, "fd %ld", x.fd);
    uint32_t f = flags_of((int)x.fd);
    cr_assert(f & kFileOwned, "fd %ld", x.fd);
    cr_assert(f & kFilePollable, "fd %ld", x.fd);
    cr_assert_eq((f & kFileUserNonblock) != 0, x.nb, "fd %ld: the program's view", x.fd);
    cr_assert_eq(fdop_fcntl((int)x.fd, F_GETFL, 0) & O_NONBLOCK ? 1 : 0, x.nb ? 1 : 0);
  }
  int p[2];
  cr_assert_eq(fdop_pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
  cr_assert_eq(kind_of(p[0]), FdKind::Pipe);
  cr_assert(flags_of(p[1]) & kFileUserNonblock);
  for (auto& x : made) fdop_close((int)x.fd);
  fdop_close(p[0]);
  fdop_close(p[1]);
}

Test(fdtable, dup_shares_the_description_and_close_frees) {
  int32_t live0 = fd_live_descs();
  int p[2];
  cr_assert_eq(fdop_pipe2(p, 0), 0);
  cr_assert_eq(fd_live_descs(), live0 + 2);
  int d = (int)fdop_dup(p[0]);
  cr_assert_geq(d, 0);
  PollDesc* a = fd_peek(p[0]);
  PollDesc* b = fd_peek(d);
  cr_assert_neq(a, b, "one descriptor per number");
  cr_assert_eq(a->file, b->file, "one record per open file description");
  cr_assert_eq(a->file->refs.load(), 2);
  // The program's O_NONBLOCK set through the dup shows through the original.
  cr_assert_eq(fdop_fcntl(d, F_SETFL, O_NONBLOCK), 0);
  cr_assert(fdop_fcntl(p[0], F_GETFL, 0) & O_NONBLOCK);
  cr_assert_eq(fdop_close(d), 0);
  cr_assert_eq(a->file->refs.load(), 1);
  cr_assert_eq(fdop_close(p[0]), 0);
  cr_assert_eq(fdop_close(p[1]), 0);
  cr_assert_eq(fd_live_descs(), live0);
  cr_assert_eq(fdop_close(p[0]), -EBADF);
}

Test(fdtable, nonblock_view_hides_goshims_flag) {
  runtime_up.store(true);  // creation keeps new fds O_NONBLOCK underneath
  int p[2];
  cr_assert_eq(fdop_pipe2(p, 0), 0);
  runtime_up.store(false);
  cr_assert(sys::fcntl(p[0], F_GETFL, 0) & O_NONBLOCK, "non-blocking in the kernel");
  cr_assert(!(fdop_fcntl(p[0], F_GETFL, 0) & O_NONBLOCK), "blocking as the program sees it");
  cr_assert(fd_emulates_blocking(p[0]));
  int on = 1;
  cr_assert_eq(fdop_ioctl(p[0], FIONBIO, (long)&on), 0);
  cr_assert(fdop_fcntl(p[0], F_GETFL, 0) & O_NONBLOCK);
  cr_assert(!fd_emulates_blocking(p[0]));
  on = 0;
  cr_assert_eq(fdop_ioctl(p[0], FIONBIO, (long)&on), 0);
  cr_assert(!(fdop_fcntl(p[0], F_GETFL, 0) & O_NONBLOCK));
  cr_assert(sys::fcntl(p[0], F_GETFL, 0) & O_NONBLOCK, "still non-blocking underneath");
  // Pair link: writes on p[1] arrive at p[0]'s file.
  PollDesc* r = fd_peek(p[0]);
  PollDesc* w = fd_peek(p[1]);
  cr_assert_eq(w->file->peer, r->file);
  cr_assert(r->file->flags.load() & kFileChan);
  cr_assert_eq(r->file->rpd.load(), r);
  // Handing the fd to stdio (or another process) restores blocking mode.
  fd_release_to_kernel(p[0]);
  cr_assert(!(sys::fcntl(p[0], F_GETFL, 0) & O_NONBLOCK));
  cr_assert(r->file->flags.load() & kFileTainted);
  fdop_close(p[0]);
  fdop_close(p[1]);
}

Test(fdtable, close_with_an_operation_in_flight_keeps_the_file) {
  int p[2];
  cr_assert_eq(fdop_pipe2(p, 0), 0);
  int err;
  PollDesc* pd = fd_get(p[0], &err);  // an operation in flight
  cr_assert_not_null(pd);
  cr_assert_eq(fdop_close(p[0]), 0);
  cr_assert_lt(sys::fcntl(p[0], F_GETFD, 0), 0, "the program's number is closed");
  int hidden = pd->fd.load();
  cr_assert_neq(hidden, p[0], "the operation moved to a hidden number");
  cr_assert_geq(sys::fcntl(hidden, F_GETFD, 0), 0);
  cr_assert(sys::fcntl(hidden, F_GETFD, 0) & FD_CLOEXEC);
  // The file is alive for the operation: data written now reaches it.
  cr_assert_eq(sys::write(p[1], "z", 1), 1);
  char c = 0;
  cr_assert_eq(sys::read(hidden, &c, 1), 1);
  cr_assert_eq(c, 'z');
  // The number is free for reuse at once.
  int again[2];
  cr_assert_eq(fdop_pipe2(again, 0), 0);
  cr_assert_eq(again[0], p[0], "the lowest number is reused");
  pd_put(pd);  // the last operation out closes the hidden number
  cr_assert_lt(sys::fcntl(hidden, F_GETFD, 0), 0);
  fdop_close(p[1]);
  fdop_close(again[0]);
  fdop_close(again[1]);
}

namespace {
int wfd;
void* late_writer(void*) {
  usleep(50000);
  sys::write(wfd, "hello", 5);
  return nullptr;
}
void* slow_reader(void* arg) {
  size_t want = (size_t)arg, got = 0;
  char buf[65536];
  usleep(20000);
  while (got < want) {
    long r = io_read(wfd, buf, sizeof buf);
    if (r <= 0) break;
    got += (size_t)r;
  }
  return (void*)got;
}
}  // namespace

Test(fdtable, kernel_threads_block_on_emulated_fds) {
  runtime_up.store(true);
  int p[2];
  cr_assert_eq(fdop_pipe2(p, 0), 0);
  runtime_up.store(false);
  cr_assert(fd_emulates_blocking(p[0]));
  wfd = p[1];
  pthread_t t;
  pthread_create(&t, nullptr, late_writer, nullptr);
  char buf[16];
  long r = io_read(p[0], buf, sizeof buf);  // blocks (poll) instead of EAGAIN
  pthread_join(t, nullptr);
  cr_assert_eq(r, 5);
  // A large write completes in one call while a reader drains slowly.
  size_t n = 2 << 20;
  char* data = (char*)calloc(1, n);
  wfd = p[0];
  pthread_create(&t, nullptr, slow_reader, (void*)n);
  r = io_write(p[1], data, n);
  void* got;
  pthread_join(t, &got);
  cr_assert_eq(r, (long)n);
  cr_assert_eq((size_t)got, n);
  free(data);
  // A program-non-blocking fd still says EAGAIN.
  cr_assert_eq(fdop_fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
  cr_assert_eq(io_read(p[0], buf, 1), -EAGAIN);
  fdop_close(p[0]);
  fdop_close(p[1]);
}

Test(fdtable, dup2_onto_a_tracked_fd) {
  int a[2], b[2];
  cr_assert_eq(fdop_pipe2(a, 0), 0);
  cr_assert_eq(fdop_pipe2(b, 0), 0);
  PollDesc* old = fd_peek(b[0]);
  cr_assert_eq(fdop_dup3(a[0], b[0], 0, true), b[0]);
  PollDesc* now = fd_peek(b[0]);
  cr_assert_neq(now, old);
  cr_assert_eq(now->file, fd_peek(a[0])->file);
  cr_assert_eq(fdop_dup3(a[0], a[0], 0, true), a[0]);
  cr_assert_eq(fdop_dup3(a[0], a[0], 0, false), -EINVAL);
  cr_assert_eq(fdop_dup3(555555, b[0], 0, true), -EBADF);
  cr_assert_eq(fd_peek(b[0]), now, "a failed dup2 leaves newfd alone");
  for (int x : {a[0], a[1], b[0], b[1]}) fdop_close(x);
}

Test(fdtable, close_range_retires_tracked_fds) {
  int p[2];
  cr_assert_eq(fdop_pipe2(p, 0), 0);
  int lo = p[0] < p[1] ? p[0] : p[1];
  int hi = p[0] < p[1] ? p[1] : p[0];
  cr_assert_eq(fdop_close_range((unsigned)lo, (unsigned)hi, 0), 0);
  cr_assert_null(fd_peek(p[0]));
  cr_assert_null(fd_peek(p[1]));
  cr_assert_lt(sys::fcntl(p[0], F_GETFD, 0), 0);
}
