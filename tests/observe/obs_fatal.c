/* A process at the end of its address space forks: natively the child
 * runs (it needs no new memory to write a line and exit); under goshim
 * the child's runtime cannot map what its first write needs (the fd
 * table's first chunk) and stops with a fatal error. t_fatal_core checks
 * how that error ends the child.
 *
 * The program installs a SIGABRT handler (it prints "handler ran") and
 * raises the soft RLIMIT_CORE to the hard one. A first child sets
 * RLIMIT_AS to its current size and forks the second; the first reports
 * how the second ended on stdout:
 *   "grandchild: exit N" or "grandchild: signal S core C". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_abrt(int sig) {
  (void)sig;
  static const char m[] = "handler ran\n";
  if (write(2, m, sizeof m - 1) < 0) _exit(3);
}

static long vm_size(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmSize:", 7) == 0) kib = atol(line + 7);
  if (f) fclose(f);
  return kib * 1024;
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_abrt;
  if (sigaction(SIGABRT, &sa, NULL) != 0) return 2;
  struct rlimit c;
  if (getrlimit(RLIMIT_CORE, &c) != 0) return 2;
  c.rlim_cur = c.rlim_max;
  if (setrlimit(RLIMIT_CORE, &c) != 0) return 2;
  fflush(stdout);
  pid_t p = fork();
  if (p < 0) return 2;
  if (p == 0) {
    long v = vm_size();
    struct rlimit as = {(rlim_t)v, (rlim_t)v};
    if (v <= 0 || setrlimit(RLIMIT_AS, &as) != 0) _exit(2);
    pid_t q = fork();
    if (q < 0) {
      printf("fork: failed\n");
      fflush(stdout);
      _exit(0);
    }
    if (q == 0) {
      static const char m[] = "grandchild ran\n";
      _exit(write(1, m, sizeof m - 1) == sizeof m - 1 ? 0 : 1);
    }
    int st;
    if (waitpid(q, &st, 0) != q) _exit(2);
    if (WIFSIGNALED(st))
      printf("grandchild: signal %d core %d\n", WTERMSIG(st), WCOREDUMP(st) ? 1 : 0);
    else
      printf("grandchild: exit %d\n", WEXITSTATUS(st));
    fflush(stdout);
    _exit(0);
  }
  int st;
  if (waitpid(p, &st, 0) != p || !WIFEXITED(st)) return 2;
  return WEXITSTATUS(st);
}
