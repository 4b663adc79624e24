// core/sysmon.cpp: the reading of /proc/self/task/TID/syscall behind
// behind_replaced (two Ms asleep in the same call on the same first
// argument wait behind the same lock), and sysmon's decisions: the hand-off
// of a P in a blocking call (sysmon_retake on fake Ps and Ms at given
// times), the schedtick comparison and the time-slice rule behind
// preemption and what preemptone sets, the CPU-clock stall rule, the sleep
// backoff, and rescue_stranded's decision.
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <new>

#include "core/gmp.hpp"
#include "core/preempt.hpp"
#include "core/sched.hpp"
#include "core/sysmon.hpp"
#include "core/timer.hpp"

using namespace goshim;

Test(sysmon, syscall_line_in_a_call) {
  uint64_t nr = 1, a0 = 1;
  cr_assert(syscall_line_parse("202 0x55aed7acde00 0x80 0x2 0x0 0x0 0x0 0x7ffe473b6288 0x7f8ad56a412b\n",
                               &nr, &a0));
  cr_expect_eq(nr, 202u);
  cr_expect_eq(a0, 0x55aed7acde00ull);
  cr_assert(syscall_line_parse("98 0xffffffffffffffff 0x80 0x2 0x0 0x0 0x0 0x1 0x2", &nr, &a0));
  cr_expect_eq(nr, 98u);
  cr_expect_eq(a0, ~0ull);
  cr_assert(syscall_line_parse("0 0x0 0x7f 0x1 0x0 0x0 0x0 0x1 0x2\n", &nr, &a0));
  cr_expect_eq(nr, 0u);
  cr_expect_eq(a0, 0u);
}

Test(sysmon, syscall_line_not_in_a_call) {
  uint64_t nr = 7, a0 = 7;
  const char* no[] = {"running\n", "-1 0x7ffe473b6288 0x7f8ad56a412b\n", "", "202", "202 ", "202 0x",
                      "202 55aed7acde00 0x80", "202 0x12345678901234567 0x0", "202 0x12g4 0x0"};
  for (const char* s : no) cr_expect(!syscall_line_parse(s, &nr, &a0), "'%s' accepted", s);
  cr_expect_eq(nr, 7u);
  cr_expect_eq(a0, 7u);
}

// A thread asleep in read on a pipe, as the kernel shows it: the call's
// first argument is the pipe (its number is the host's under qemu-user,
// whose thread makes the host's read: not checked).
static int pipefd[2];
static void* reader(void*) {
  char c;
  return (void*)(long)read(pipefd[0], &c, 1);
}

Test(sysmon, syscall_line_of_a_sleeping_thread) {
  cr_assert_eq(pipe(pipefd), 0);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, nullptr, reader, nullptr), 0);
  pid_t self = (pid_t)syscall(SYS_gettid);
  bool seen = false;
  for (int tries = 0; tries < 100000 && !seen; tries++) {
    DIR* d = opendir("/proc/self/task");
    cr_assert(d);
    while (struct dirent* e = readdir(d)) {
      if (e->d_name[0] == '.' || atoi(e->d_name) == self) continue;
      char path[96], line[256];
      snprintf(path, sizeof path, "/proc/self/task/%s/syscall", e->d_name);
      FILE* f = fopen(path, "r");
      if (!f) continue;
      size_t n = fread(line, 1, sizeof line - 1, f);
      fclose(f);
      line[n] = 0;
      uint64_t nr, a0;
      if (syscall_line_parse(line, &nr, &a0) && a0 == (uint64_t)pipefd[0]) seen = true;
    }
    closedir(d);
    if (!seen) usleep(100);
  }
  cr_expect(seen, "no thread shown asleep in a call on fd %d", pipefd[0]);
  cr_assert_eq(write(pipefd[1], "x", 1), 1);
  pthread_join(t, nullptr);
  close(pipefd[0]);
  close(pipefd[1]);
}

// sysmon's decisions (core/sysmon.hpp, split out of its loop): on fake Ps,
// Ms and Gs and given times, never on a clock. What is not tested here:
// retake()'s own walk (the syscalltick bookkeeping and the on-CPU rule of a
// P in a Syscall that end in handoffp, which would start Ms), check_m's
// /proc reads, replace_stalled, and the loop's kick rate limit.

namespace {

template <class T>
T* new_aligned() {
  return new (aligned_alloc(64, (sizeof(T) + 63) & ~size_t{63})) T();
}

constexpr int64_t kMs = 1000000;

int nasleep_asked;
bool asleep_answer;
bool fake_asleep(M*) {
  nasleep_asked++;
  return asleep_answer;
}

int nretry_asked;
bool retry_answer = true;
bool fake_retry_due() {
  nretry_asked++;
  return retry_answer;
}

}  // namespace

// The schedtick comparison behind preemption and the stall watch: a P is
// judged only when it has had the same slice since the previous look.
Test(sysmon, same_slice_by_schedtick) {
  P* pp = new_aligned<P>();
  pp->schedtick = 5;
  cr_expect(!retake_same_slice(pp, 1000), "a P never looked at judged");
  cr_expect_eq(pp->sm_schedtick, 5u);
  cr_expect_eq(pp->sm_schedwhen, 1000);
  cr_expect(retake_same_slice(pp, 1000 + 20 * kMs), "the same slice not seen as such");
  cr_expect_eq(pp->sm_schedwhen, 1000, "the slice's start moved while it lasted");
  // Its G switched in the meantime: a new slice; the previous slice's CPU
  // samples are forgotten.
  pp->sm_cputime = 77;
  pp->sm_slice_cpu = 66;
  pp->schedtick = 6;
  cr_expect(!retake_same_slice(pp, 2000 + 20 * kMs), "a G that switched judged by the old slice");
  cr_expect_eq(pp->sm_schedwhen, 2000 + 20 * kMs);
  cr_expect_eq(pp->sm_cputime, -1);
  cr_expect_eq(pp->sm_slice_cpu, -1);
  // A wrapped tick that lands on the same value is the same slice (as in Go).
  cr_expect(retake_same_slice(pp, 3000 + 20 * kMs));
}

// Preemption: a slice of 10 ms or more, spent computing.
Test(sysmon, preempt_after_a_time_slice) {
  M* mp = new_aligned<M>();
  nasleep_asked = 0;
  asleep_answer = false;
  // On the CPU the whole time: preempted at 10 ms, not before.
  cr_expect(!slice_computing(10 * kMs - 1, 10 * kMs - 1, true, fake_asleep, mp));
  cr_expect(slice_computing(10 * kMs, 10 * kMs, true, fake_asleep, mp));
  // Half the slice on the CPU is enough; less is not for the only goroutine
  // (its thread state is not looked up).
  cr_expect(slice_computing(20 * kMs, 10 * kMs, true, fake_asleep, mp));
  cr_expect(!slice_computing(20 * kMs, 10 * kMs - 1, true, fake_asleep, mp));
  cr_expect_eq(nasleep_asked, 0, "/proc read for the only goroutine");
  // With others: on the CPU some of the slice and runnable (not asleep).
  cr_expect(slice_computing(20 * kMs, 1, false, fake_asleep, mp));
  asleep_answer = true;
  cr_expect(!slice_computing(20 * kMs, 1, false, fake_asleep, mp), "a G asleep in the kernel preempted");
  // No CPU at all in the slice: asleep, never preempted.
  asleep_answer = false;
  cr_expect(!slice_computing(20 * kMs, 0, false, fake_asleep, mp));
}

// What preemption sets: the G's and the P's preempt flags (the G yields at
// its next interposed call). No signal here: the fake M has no thread.
Test(sysmon, preemptone_sets_the_flags) {
  P* pp = new_aligned<P>();
  M* mp = new_aligned<M>();
  G* gp = new_aligned<G>();
  gp->status.store(GStatus::Running);
  gp->m = mp;
  mp->curg = gp;
  mp->p = pp;
  pp->m = mp;
  preemptone(pp);
  cr_expect(gp->preempt.load(), "G not asked to yield");
  cr_expect(pp->preempt.load(), "P not marked");
  // An M on its g0 (in the scheduler): nothing to preempt.
  P* p2 = new_aligned<P>();
  M* m2 = new_aligned<M>();
  m2->g0.flags = kGFlagG0;
  m2->curg = &m2->g0;
  p2->m = m2;
  preemptone(p2);
  cr_expect(!m2->g0.preempt.load());
  cr_expect(!p2->preempt.load());
}

// Go's rule for a P in a blocking call seen twice: hand-off unless nothing
// waits and an M spins or a P is idle; then after 10 ms regardless.
Test(sysmon, syscall_handoff_rule) {
  cr_expect(syscall_p_keep(true, 0, 1, 0));
  cr_expect(syscall_p_keep(true, 0, 1, 10 * kMs - 1), "handed off before 10 ms with nothing waiting");
  cr_expect(!syscall_p_keep(true, 0, 1, 10 * kMs), "kept past 10 ms");
  cr_expect(!syscall_p_keep(true, 0, 1, 50 * kMs));
  cr_expect(!syscall_p_keep(false, 0, 1, 0), "kept while its run queue waits");
  cr_expect(!syscall_p_keep(true, 1, 1, 0), "kept while the global queue waits");
  cr_expect(!syscall_p_keep(true, 0, 0, 0), "kept with no M spinning and no P idle");
}

// The stuck-thread watch: less than half of at least 20 us on the CPU.
Test(sysmon, stall_by_cpu_clock) {
  cr_expect(!stall_suspect(0, 20000 - 1), "stall judged on less than 20 us");
  cr_expect(stall_suspect(0, 20000));
  cr_expect(stall_suspect(5 * kMs - 1, 10 * kMs));
  cr_expect(!stall_suspect(5 * kMs, 10 * kMs), "half the time on the CPU judged stuck");
  cr_expect(!stall_suspect(10 * kMs, 10 * kMs));
  cr_expect(!stall_suspect(0, 0));
  cr_expect(!stall_suspect(0, -30000), "a clock going back judged");
}

// sysmon's sleep: 20 us while it finds work, doubling after 50 idle looks,
// at most 10 ms; back to 20 us at the first look with work.
Test(sysmon, sleep_backoff) {
  int64_t d = 20;
  int idle = 0;
  d = sysmon_delay_us(d, idle);
  cr_expect_eq(d, 20);
  for (idle = 1; idle <= 50; idle++) {
    d = sysmon_delay_us(d, idle);
    cr_expect_eq(d, 20, "idle look %d slept %ld us", idle, (long)d);
  }
  int64_t want = 20;
  for (; idle <= 70; idle++) {
    d = sysmon_delay_us(d, idle);
    want = want * 2 > 10000 ? 10000 : want * 2;
    cr_expect_eq(d, want, "idle look %d slept %ld us, not %ld", idle, (long)d, (long)want);
  }
  cr_expect_eq(d, 10000);
  cr_expect_eq(sysmon_delay_us(d, 0), 20, "work found: not back to 20 us");
}

// rescue_stranded's decision: an M on the second stranded look, or at the
// first when newm asked; not before newm's retry pause.
Test(sysmon, rescue_decision) {
  bool wanted = false;
  int looks = 0;
  nretry_asked = 0;
  retry_answer = true;
  cr_expect(!rescue_decide(false, &wanted, &looks, fake_retry_due));
  cr_expect(!rescue_decide(true, &wanted, &looks, fake_retry_due), "an M on the first look (a wakeup may be on its way)");
  cr_expect_eq(looks, 1);
  cr_expect(rescue_decide(true, &wanted, &looks, fake_retry_due), "no M on the second stranded look");
  cr_expect_eq(looks, 0);
  // A look that finds work taken resets the count.
  cr_expect(!rescue_decide(true, &wanted, &looks, fake_retry_due));
  cr_expect(!rescue_decide(false, &wanted, &looks, fake_retry_due));
  cr_expect(!rescue_decide(true, &wanted, &looks, fake_retry_due), "looks not reset by a look with nothing stranded");
  // newm asked: at once, and the request is served.
  looks = 0;
  wanted = true;
  cr_expect(rescue_decide(true, &wanted, &looks, fake_retry_due), "newm's request not served");
  cr_expect(!wanted);
  // Nothing stranded: the request is dropped.
  wanted = true;
  cr_expect(!rescue_decide(false, &wanted, &looks, fake_retry_due));
  cr_expect(!wanted);
  // After a failed thread creation: not before its pause.
  retry_answer = false;
  wanted = true;
  int before = nretry_asked;
  cr_expect(!rescue_decide(true, &wanted, &looks, fake_retry_due), "an M started during newm's pause");
  cr_expect(wanted, "newm's request dropped while waiting for the pause");
  cr_expect_eq(nretry_asked, before + 1);
  retry_answer = true;
  cr_expect(rescue_decide(true, &wanted, &looks, fake_retry_due));
}

// What counts as stranded: a P idle, no M spinning, and Gs queued globally
// or in the ring of a busy P.
Test(sysmon, stranded_state) {
  constexpr int kNP = 2;
  P* ps[kNP];
  sched.gomaxprocs = kNP;
  for (int i = 0; i < kNP; i++) {
    ps[i] = new_aligned<P>();
    ps[i]->id = i;
    sched.allp[i].store(ps[i]);
  }
  ps[0]->status.store(PStatus::Running);
  ps[1]->status.store(PStatus::Idle);
  sched.npidle.store(1);
  sched.nmspinning.store(0);
  sched.runqsize.store(0);
  cr_expect(!gs_stranded(), "stranded with nothing queued");
  sched.runqsize.store(1);
  cr_expect(gs_stranded(), "global queue not seen");
  sched.nmspinning.store(1);
  cr_expect(!gs_stranded(), "stranded while an M spins");
  sched.nmspinning.store(0);
  sched.npidle.store(0);
  cr_expect(!gs_stranded(), "stranded with no P idle");
  sched.npidle.store(1);
  sched.runqsize.store(0);
  ps[0]->runqtail.store(1);  // one G in the busy P's ring
  cr_expect(gs_stranded(), "a busy P's ring not seen");
  ps[0]->status.store(PStatus::Idle);
  cr_expect(!gs_stranded(), "an idle P's ring counted");
  ps[0]->status.store(PStatus::Syscall);
  cr_expect(gs_stranded(), "the ring of a P in a blocking call not seen");
}

// sysmon_retake's walk over a P in a blocking call (PStatus::Syscall) at
// given times: ps[0] is in the call (no blocking M recorded, so no CPU
// clock is read), ps[1] idle, one fake idle M that a hand-off with work
// gets the P (startm: nextp), never a kernel thread.
namespace {

P* sp[2];
M* idle_m;
constexpr int64_t kT0 = 1000 * kMs;

void syscall_setup(bool p1_idle) {
  sched.gomaxprocs = 2;
  sched.lastpoll.store(0);  // an M is in netpoll: a hand-off with nothing to do starts no M
  for (int i = 0; i < 2; i++) {
    sp[i] = new_aligned<P>();
    sp[i]->id = i;
    sp[i]->schedtick = 1;
    timers_init(&sp[i]->timers);
    sched.allp[i].store(sp[i]);
  }
  sp[0]->status.store(PStatus::Syscall);
  sp[0]->syscalltick.store(1);
  if (p1_idle) {
    sp[1]->status.store(PStatus::Idle);
    sched.pidle = sp[1];
    sched.npidle.store(1);
  } else {
    sp[1]->status.store(PStatus::Running);
    sp[1]->schedtick = 1;
  }
  idle_m = new_aligned<M>();
  idle_m->id = 7;
  mput(idle_m);
}

}  // namespace

// Nothing waits and a P is idle: the P stays with its M for 10 ms of the
// same call, then is handed off (to the idle list: no M started).
Test(sysmon, retake_syscall_nothing_waits) {
  syscall_setup(true);
  cr_expect_eq(sysmon_retake(kT0), 0u, "handed off at the first sight of the call");
  cr_expect_eq(sysmon_retake(kT0 + 20000), 0u, "handed off at 20 us with nothing waiting");
  cr_expect_eq(sysmon_retake(kT0 + 10 * kMs - 1), 0u, "handed off before 10 ms");
  cr_expect(sp[0]->status.load() == PStatus::Syscall);
  cr_expect_eq(sysmon_retake(kT0 + 10 * kMs), 1u, "not handed off after 10 ms in the same call");
  cr_expect(sp[0]->status.load() == PStatus::Idle);
  cr_expect_eq(sched.nhandoff.load(), 1u);
  cr_expect_eq(sched.pidle, sp[0], "not put on the idle list");
  cr_expect_null(idle_m->nextp, "an M started with nothing to do");
}

// A new call (syscalltick moved) starts the count again.
Test(sysmon, retake_syscall_new_call) {
  syscall_setup(true);
  cr_expect_eq(sysmon_retake(kT0), 0u);
  sp[0]->syscalltick.store(2);
  cr_expect_eq(sysmon_retake(kT0 + 5 * kMs), 0u);
  cr_expect_eq(sysmon_retake(kT0 + 10 * kMs), 0u, "a call of 5 ms handed off as one of 10 ms");
  cr_expect(sp[0]->status.load() == PStatus::Syscall);
  cr_expect_eq(sysmon_retake(kT0 + 15 * kMs), 1u);
  cr_expect(sp[0]->status.load() == PStatus::Idle);
}

// Work waits (a G on the global queue): handed off at the second look at
// the same call, to an M started for it; not at the first.
Test(sysmon, retake_syscall_work_waits) {
  syscall_setup(true);
  sched.runqsize.store(1);
  cr_expect_eq(sysmon_retake(kT0), 0u, "handed off at the first sight of the call");
  cr_expect(sp[0]->status.load() == PStatus::Syscall);
  cr_expect_eq(sysmon_retake(kT0 + 20000), 1u, "not handed off with work waiting");
  cr_expect(sp[0]->status.load() == PStatus::Idle);
  cr_expect_eq(idle_m->nextp, sp[0], "no M given the P");
  cr_expect(!idle_m->spinning);
}

// Go's rule: nothing queued, but no M spinning and no P idle: handed off
// at the second look, to a spinning M that looks for work.
Test(sysmon, retake_syscall_no_idle_p) {
  syscall_setup(false);
  cr_expect_eq(sysmon_retake(kT0), 0u);
  cr_expect_eq(sysmon_retake(kT0 + 20000), 1u, "kept with no M spinning and no P idle");
  cr_expect_eq(idle_m->nextp, sp[0]);
  cr_expect(idle_m->spinning, "the M started is not spinning");
  cr_expect_eq(sched.nmspinning.load(), 1);
}
