/* Test-only helper for emulated runs (make ARCH=aarch64 test on another
 * machine, under qemu-user without binfmt_misc). A program of the target
 * that execs a program of the target (Criterion re-executes the unit test
 * binary for every test; a test may exec itself) would get ENOEXEC from
 * the host kernel. Preloaded into every emulated test program (the native
 * run as much as the goshim one), this execve runs such a program under
 * the emulator again ($EMU_EXEC, e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu"),
 * with the LD_PRELOAD of the new program's environment handed to the
 * emulator as QEMU_SET_ENV (an LD_PRELOAD in the emulator's own
 * environment would reach the host's loader). Any other program (the
 * host's /bin/sh) is exec'd as it is. Only direct execve, execv and execl
 * calls are seen: glibc's execvp/system/posix_spawn call its internal
 * __execve. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__aarch64__)
#define TARGET_MACHINE EM_AARCH64
#elif defined(__x86_64__)
#define TARGET_MACHINE EM_X86_64
#endif

typedef int (*execve_fn)(const char *, char *const[], char *const[]);

static int is_target(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  Elf64_Ehdr h;
  ssize_t n = read(fd, &h, sizeof h);
  close(fd);
  return n == (ssize_t)sizeof h && memcmp(h.e_ident, ELFMAG, SELFMAG) == 0 &&
         h.e_machine == TARGET_MACHINE;
}

static int wrap_execve(const char *path, char *const argv[], char *const envp[]) {
  execve_fn real = (execve_fn)dlsym(RTLD_NEXT, "execve");
  const char *emu = getenv("EMU_EXEC");
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  if (!emu || !*emu || !is_target(path)) return real(path, argv, envp);
  char self[4096];
  if (strcmp(path, "/proc/self/exe") == 0) {
    ssize_t n = readlink(path, self, sizeof self - 1);
    if (n > 0) {
      self[n] = 0;
      path = self;
    }
  }
  size_t na = 0, ne = 0;
  while (argv[na]) na++;
  while (envp && envp[ne]) ne++;
  char *words = strdup(emu);
  char **nargv = calloc(na + 32, sizeof(char *));
  char **nenv = calloc(ne + 2, sizeof(char *));
  if (!words || !nargv || !nenv) {
    errno = ENOMEM;
    return -1;
  }
  size_t k = 0;
  for (char *save = NULL, *w = strtok_r(words, " ", &save); w && k < 24;
       w = strtok_r(NULL, " ", &save))
    nargv[k++] = w;
  if (argv[0]) {
    nargv[k++] = "-0";
    nargv[k++] = argv[0];
  }
  nargv[k++] = (char *)path;
  for (size_t i = 1; i < na; i++) nargv[k++] = argv[i];
  nargv[k] = NULL;
  size_t m = 0;
  for (size_t i = 0; i < ne; i++) {
    if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0) {
      char *v = malloc(strlen(envp[i]) + 16);
      if (!v) {
        errno = ENOMEM;
        return -1;
      }
      sprintf(v, "QEMU_SET_ENV=%s", envp[i]);
      nenv[m++] = v;
    } else if (strncmp(envp[i], "QEMU_SET_ENV=", 13) != 0) {
      nenv[m++] = envp[i];
    }
  }
  nenv[m] = NULL;
  /* The emulator itself: a program of the host, found on PATH. */
  char *const *e = nenv;
  int r = execvpe(nargv[0], nargv, e);
  return r;
}

int execve(const char *path, char *const argv[], char *const envp[]) {
  return wrap_execve(path, argv, envp);
}

/* glibc's execv calls its internal __execve: wrapped here as well (a test
 * that re-executes itself with execv, e.g. rt_fifo). */
extern char **environ;
int execv(const char *path, char *const argv[]) { return wrap_execve(path, argv, environ); }

int execl(const char *path, const char *arg, ...) {
  char *argv[64];
  size_t n = 0;
  argv[n++] = (char *)arg;
  va_list ap;
  va_start(ap, arg);
  while (argv[n - 1] && n < 64) argv[n++] = va_arg(ap, char *);
  va_end(ap);
  if (argv[n - 1]) {
    errno = E2BIG;
    return -1;
  }
  return wrap_execve(path, argv, environ);
}
