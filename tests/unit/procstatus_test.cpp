// The /proc status reader (core/procstatus): keys matched whole at a
// line's start, hex, decimal and a first character, a wanted line after
// one longer than any buffer, a missing key, an unreadable file; and the
// real file of this thread.
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/procstatus.hpp"

using namespace goshim;

namespace {

void write_file(const char* path, const char* text, size_t groups) {
  FILE* f = fopen(path, "w");
  cr_assert(f);
  fputs("Name:\tprog\nState:\tS (sleeping)\nSigQ:\t7/95012\nGroups:\t", f);
  for (size_t i = 0; i < groups; i++) fprintf(f, "%zu ", 1000000 + i);
  fputs("\n", f);
  fputs(text, f);
  fclose(f);
}

}  // namespace

Test(procstatus, fields_after_a_long_line) {
  char path[] = "/tmp/procstatus_test.XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  // 5,000 groups: a 40 KB line before the signal lines. ShdPnd comes
  // before SigPnd: a prefix or substring match would take it.
  write_file(path, "ShdPnd:\t0000000000000001\nSigPnd:\t0000000000001000\nSigBlk:\tfffffffe7ffbfeff\n"
             "Threads:\t12\nSig:\t9\n", 5000);
  StatusField f[6] = {{"SigPnd", 16, 0, false}, {"SigBlk", 16, 0, false}, {"State", 0, 0, false},
                      {"SigQ", 10, 0, false},   {"Threads", 10, 0, false}, {"Missing", 10, 0, false}};
  cr_assert(proc_status(path, f, 6));
  cr_expect(f[0].found && f[0].value == 0x1000, "SigPnd %llx", (unsigned long long)f[0].value);
  cr_expect(f[1].found && f[1].value == 0xfffffffe7ffbfeffull);
  cr_expect(f[2].found && f[2].value == 'S');
  cr_expect(f[3].found && f[3].value == 7, "SigQ's count before the slash");
  cr_expect(f[4].found && f[4].value == 12);
  cr_expect(!f[5].found);
  unlink(path);
}

Test(procstatus, last_line_without_newline) {
  char path[] = "/tmp/procstatus_test.XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  write_file(path, "Threads:\t3", 0);
  StatusField f = {"Threads", 10, 0, false};
  cr_assert(proc_status(path, &f, 1));
  cr_expect(f.found && f.value == 3);
  unlink(path);
}

Test(procstatus, unreadable) {
  StatusField f = {"Threads", 10, 0, true};
  cr_expect(!proc_status("/nonexistent/status", &f, 1));
  cr_expect(!f.found);
  uint64_t v = 42;
  cr_expect(!task_status(999999999, "SigPnd", 16, &v));
  cr_expect(v == 42);
}

Test(procstatus, this_threads_pending_signal) {
  sigset_t s, old;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &s, &old);
  syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR2);
  uint64_t v = 0;
  cr_assert(task_status(syscall(SYS_gettid), "SigPnd", 16, &v));
  cr_expect(v == 1ull << (SIGUSR2 - 1), "SigPnd %llx", (unsigned long long)v);
  int sig;
  sigwait(&s, &sig);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}
