// The netpoll layer without a scheduler: the wake token's state machine
// (gwait), poll descriptor queues and event dispatch, the handoff claim,
// and the epoll backend delivering tagged events. Fake Gs are plain G
// objects that never run: "parking" is simulated with gwait_commit, and
// claimed Gs are collected in a GQueue instead of being readied.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <new>

#include "core/fdtable.hpp"
#include "core/gwait.hpp"
#include "core/netpoll.hpp"
#include "syscalls/sys.hpp"

using namespace goshim;

namespace {

template <class T>
T* new_aligned() {
  return new (aligned_alloc(64, (sizeof(T) + 63) & ~size_t{63})) T();
}

// The M the fake Gs "run" on, so that the contracts the debug build checks
// hold: gwait_arm and gwait_disarm run on the G itself, gwait_commit on its
// M's g0.
M* fake_m() {
  static M* mp = [] {
    M* m = new_aligned<M>();
    m->g0.flags |= kGFlagG0;
    m->g0.m = m;
    return m;
  }();
  return mp;
}

G* fake_g() {
  G* gp = new_aligned<G>();
  gp->status.store(GStatus::Running, std::memory_order_relaxed);
  gp->m = fake_m();
  return gp;
}

uint64_t arm(G* gp, WaitKind kind) {
  G* was = tls_g;
  tls_g = gp;
  uint64_t seq = gwait_arm(gp, kind, false);
  tls_g = was;
  return seq;
}

WakeReason disarm(G* gp) {
  G* was = tls_g;
  tls_g = gp;
  WakeReason r = gwait_disarm(gp);
  tls_g = was;
  return r;
}

bool commit(G* gp) {
  G* was = tls_g;
  tls_g = &fake_m()->g0;
  bool ok = gwait_commit(gp);
  tls_g = was;
  return ok;
}

// A fake G waiting on pd's side `mode` (armed, queued, parked).
uint64_t park_on(G* gp, PollDesc* pd, uint8_t mode, void* buf = nullptr, size_t len = 0) {
  uint64_t seq = arm(gp, WaitKind::Netpoll);
  PollWaiter* w = &gp->pw;
  w->gp = gp;
  w->seq = seq;
  w->mode = mode;
  w->buf = buf;
  w->len = len;
  {
    PdGuard g(pd->lock);
    pd_enqueue_locked(pd, w);
  }
  cr_assert(commit(gp), "commit");
  return seq;
}

PollDesc* pipe_desc(int fds[2]) {
  cr_assert_eq(sys::raw2(SYS_pipe2, (long)fds, O_NONBLOCK), 0);
  int err = 0;
  PollDesc* pd = fd_get(fds[0], &err);
  cr_assert_not_null(pd, "fd_get: %d", err);
  return pd;
}

void init() {
  if (!netpoll_inited()) netpoll_init();
}

}  // namespace

TestSuite(netpoll, .init = init, .timeout = 60);

Test(netpoll, token_claim_while_arming) {
  G* gp = fake_g();
  uint64_t seq = arm(gp, WaitKind::Netpoll);
  cr_assert_eq(gp->wait_kind.load(), WaitKind::Netpoll);
  GQueue q;
  cr_assert(!gwait_claim(gp, seq, WakeReason::Handoff, &q, true), "handoff needs a parked G");
  cr_assert(gwait_claim(gp, seq, WakeReason::Intr, &q));
  cr_assert(q.empty(), "a G claimed while arming resumes by itself");
  cr_assert(!gwait_claim(gp, seq, WakeReason::Ready, &q), "a second claim loses");
  cr_assert(!commit(gp), "the park must not commit after a claim");
  cr_assert_eq(disarm(gp), WakeReason::Intr, "the claim's reason survives");
  cr_assert_eq(gp->wait_kind.load(), WaitKind::None);
}

Test(netpoll, token_claim_parked_and_stale) {
  G* gp = fake_g();
  uint64_t seq = arm(gp, WaitKind::Sleep);
  cr_assert(commit(gp));
  GQueue q;
  cr_assert(!gwait_claim(gp, seq - 1, WakeReason::Timeout, &q), "a stale seq loses");
  cr_assert(!gwait_claim(gp, seq + 1, WakeReason::Timeout, &q), "a future seq loses");
  cr_assert(q.empty());
  cr_assert(gwait_claim(gp, seq, WakeReason::Intr, &q));
  cr_assert_eq(q.size, 1);
  cr_assert(!gwait_claim(gp, seq, WakeReason::Timeout, &q), "claimed once");
}

Test(netpoll, token_disarm_unclaimed) {
  G* gp = fake_g();
  uint64_t seq = arm(gp, WaitKind::Netpoll);
  cr_assert_eq(disarm(gp), WakeReason::None);
  GQueue q;
  cr_assert(!gwait_claim(gp, seq, WakeReason::Ready, &q), "an idle token cannot be claimed");
  uint64_t seq2 = arm(gp, WaitKind::Netpoll);
  cr_assert_gt(seq2, seq, "every wait has a new seq");
  cr_assert(commit(gp));
  cr_assert(gwait_claim(gp, seq2, WakeReason::Timeout, &q));
  cr_assert_eq(q.size, 1, "a parked G goes to the queue");
  cr_assert_eq(q.pop(), gp);
}

Test(netpoll, event_wakes_every_waiter_of_its_side) {
  int fds[2];
  PollDesc* pd = pipe_desc(fds);
  G* r1 = fake_g();
  G* r2 = fake_g();
  G* w1 = fake_g();
  park_on(r1, pd, kModeRead);
  park_on(r2, pd, kModeRead);
  park_on(w1, pd, kModeWrite);
  uint32_t rev = pd_events(pd, kModeRead);
  GQueue q;
  // A stale generation is ignored.
  uint64_t stale = pd_tag(pd) + (1ull << 32);
  netpoll_ready_event((void*)(uintptr_t)stale, EPOLLIN, q);
  cr_assert(q.empty());
  netpoll_ready_event((void*)(uintptr_t)pd_tag(pd), EPOLLIN, q);
  cr_assert_eq(q.size, 2, "both readers");
  cr_assert_eq(pd_events(pd, kModeRead), rev + 1);
  cr_assert(!r1->pw.linked.load() && !r2->pw.linked.load(), "records unlinked");
  cr_assert(w1->pw.linked.load(), "the writer still waits");
  GQueue q2;
  netpoll_ready_event((void*)(uintptr_t)pd_tag(pd), EPOLLOUT, q2);
  cr_assert_eq(q2.size, 1);
  cr_assert_eq(q2.pop(), w1);
  pd_put(pd);
  close(fds[0]);
  close(fds[1]);
}

Test(netpoll, handoff_claims_only_a_parked_reader_with_room) {
  int fds[2];
  PollDesc* pd = pipe_desc(fds);
  FileRec* f = pd->file;
  uint32_t gen = f->gen.load();
  char small[2], big[64];
  G* a = fake_g();
  G* b = fake_g();
  park_on(a, pd, kModeRead, small, sizeof small);
  park_on(b, pd, kModeRead, big, sizeof big);
  cr_assert_eq(pd->nhandoff.load(), 2);
  PollWaiter* w = nullptr;
  cr_assert_null(pd_claim_handoff_reader(pd, f, gen + 1, 4, &w), "wrong generation");
  G* got = pd_claim_handoff_reader(pd, f, gen, 4, &w);
  cr_assert_eq(got, b, "the first reader with room for 4 bytes");
  cr_assert_eq(w, &b->pw);
  cr_assert_eq(pd->nhandoff.load(), 1);
  cr_assert(!b->pw.linked.load());
  got = pd_claim_handoff_reader(pd, f, gen, 2, &w);
  cr_assert_eq(got, a);
  cr_assert_null(pd_claim_handoff_reader(pd, f, gen, 1, &w), "nobody left");
  pd_put(pd);
  close(fds[0]);
  close(fds[1]);
}

Test(netpoll, epoll_backend_delivers_tagged_events) {
  int fds[2];
  PollDesc* pd = pipe_desc(fds);
  {
    PdGuard g(pd->lock);
    cr_assert_eq(pd_register_locked(pd), 0);
    cr_assert(pd->registered);
  }
  G* r = fake_g();
  park_on(r, pd, kModeRead);
  GQueue q;
  netpoll(0, q);  // the registration's initial edge (writable) wakes no reader
  cr_assert(q.empty() || q.head != r);
  cr_assert_eq(sys::write(fds[1], "x", 1), 1);
  GQueue q2;
  for (int i = 0; i < 100 && q2.empty(); i++) netpoll(1000000, q2);
  cr_assert_eq(q2.size, 1);
  cr_assert_eq(q2.pop(), r);
  pd_put(pd);
  close(fds[0]);
  close(fds[1]);
}

Test(netpoll, unpollable_files_are_marked) {
  char path[] = "/tmp/netpoll-test-XXXXXX";
  int fd = mkstemp(path);
  unlink(path);
  int err = 0;
  PollDesc* pd = fd_get(fd, &err);
  cr_assert_not_null(pd);
  cr_assert_eq(pd_kind(pd), FdKind::File);
  cr_assert(!(pd->file->flags.load() & kFilePollable));
  {
    PdGuard g(pd->lock);
    cr_assert_eq(pd_register_locked(pd), -EPERM);
    cr_assert(pd->unpollable);
  }
  pd_put(pd);
  close(fd);
}

#include "core/sleep.hpp"

Test(netpoll, sleep_deadlines) {
  struct timespec rel = {0, 50 * 1000 * 1000};
  int64_t d = 0;
  int64_t t0 = sys::nanotime();
  cr_assert(sleep_deadline(CLOCK_MONOTONIC, 0, &rel, &d));
  cr_assert_geq(d, t0 + 50 * 1000 * 1000, "a relative sleep never ends early");
  cr_assert_lt(d, sys::nanotime() + 50 * 1000 * 1000 + 1, "nor starts late");
  // Absolute times of CLOCK_REALTIME: converted so that the sleep ends when
  // the wall clock reaches them (or later).
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t wall = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
  int64_t target = wall + 80 * 1000 * 1000;
  struct timespec abs = {(time_t)(target / 1000000000), (long)(target % 1000000000)};
  int64_t m0 = sys::nanotime();
  cr_assert(sleep_deadline(CLOCK_REALTIME, TIMER_ABSTIME, &abs, &d));
  cr_assert_geq(d - m0, 80 * 1000 * 1000 - (sys::walltime() - wall) - 1000000);
  // In the past: due now.
  struct timespec past = {1, 0};
  int64_t before = sys::nanotime();
  cr_assert(sleep_deadline(CLOCK_MONOTONIC, TIMER_ABSTIME, &past, &d));
  cr_assert_geq(d, before);
  cr_assert_leq(d, sys::nanotime());
  // Huge requests saturate instead of overflowing.
  struct timespec huge = {(time_t)1 << 62, 0};
  cr_assert(sleep_deadline(CLOCK_MONOTONIC, 0, &huge, &d));
  cr_assert_gt(d, sys::nanotime());
  // Clocks goshim does not serve.
  cr_assert(!sleep_deadline(CLOCK_PROCESS_CPUTIME_ID, 0, &rel, &d));
  cr_assert(!sleep_deadline(CLOCK_MONOTONIC_RAW, 0, &rel, &d));
}
