// core/sysmon.cpp: the reading of /proc/self/task/TID/syscall behind
// behind_replaced (two Ms asleep in the same call on the same first
// argument wait behind the same lock).
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/sysmon.hpp"

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
