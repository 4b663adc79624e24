// goshim: runs a program with libgoshim.so preloaded.
//
//   goshim [options] -- prog [args...]
//
// The program's exit status is passed through (the launcher execs it).
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/numparse.hpp"
#include "core/size.hpp"

#ifndef GOSHIM_VERSION
#define GOSHIM_VERSION "0.1.0"
#endif

namespace {

const char* kUsage =
    "usage: goshim [options] -- program [args...]\n"
    "\n"
    "Runs an unmodified, dynamically linked program with its threads turned into\n"
    "goroutines scheduled M:N on a few kernel threads (LD_PRELOAD=libgoshim.so).\n"
    "\n"
    "options:\n"
    "  --procs N        number of processors (GOSHIM_MAXPROCS; default: CPUs)\n"
    "  --stack SIZE     default thread stack size, e.g. 256k or 8m (GOSHIM_STACK)\n"
    "  --schedtrace MS  print a scheduler summary every MS milliseconds\n"
    "  --scheddetail    with --schedtrace, print every P, M and G\n"
    "  --trace FILE     write a scheduler trace (Chrome trace JSON) to FILE\n"
    "  --no-preempt     disable asynchronous preemption (GOSHIM_PREEMPT=off)\n"
    "  --mode MODE      M:N (default) or 1:1 (threads stay kernel threads)\n"
    "  --stats          print a summary of the run at exit (GOSHIM_DEBUG=stats=1)\n"
    "  --compare        run the program twice, 1:1 then M:N, and print both\n"
    "                   summaries side by side (exit status: the M:N run's)\n"
    "  --lib PATH       use this libgoshim.so\n"
    "  --version        print the version and exit\n"
    "  --help           print this help and exit\n"
    "\n"
    "Environment knobs (see README.md): GOSHIM_MAXPROCS, GOSHIM_STACK, GOSHIM_MODE,\n"
    "GOSHIM_PREEMPT, GOSHIM_TRACE, GOSHIM_DEBUG=schedtrace=MS,scheddetail=1,stats=1,\n"
    "deadlock=0|fatal,pinned=MS,dumpsignal=SIG.\n";

[[noreturn]] void die(const char* fmt, const char* arg = "") {
  fprintf(stderr, "goshim: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nTry 'goshim --help'.\n");
  exit(2);
}

bool exists(const char* p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

// libgoshim.so next to the launcher (build tree) or in ../lib/goshim (installed).
bool find_lib(char* out, size_t size) {
  char self[PATH_MAX - 64];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return false;
  self[n] = 0;
  char* slash = strrchr(self, '/');
  if (!slash) return false;
  *slash = 0;
  snprintf(out, size, "%s/libgoshim.so", self);
  if (exists(out)) return true;
  snprintf(out, size, "%s/../lib/goshim/libgoshim.so", self);
  if (exists(out)) return true;
  return false;
}

void append_debug(const char* kv) {
  const char* old = getenv("GOSHIM_DEBUG");
  char buf[512];
  if (old && *old)
    snprintf(buf, sizeof buf, "%s,%s", old, kv);
  else
    snprintf(buf, sizeof buf, "%s", kv);
  setenv("GOSHIM_DEBUG", buf, 1);
}

// --compare: one summary per mode, read back from GOSHIM_STATS_FILE.
struct Summary {
  char keys[24][40];
  char vals[24][64];
  int n = 0;
};

void read_summary(const char* path, Summary* s) {
  FILE* f = fopen(path, "r");
  if (!f) return;
  char line[256];
  while (s->n < 24 && fgets(line, sizeof line, f)) {
    if (line[0] != ' ') continue;  // the "goshim stats (...)" header
    char* k = line;
    while (*k == ' ') k++;
    char* gap = strstr(k, "  ");
    if (!gap) continue;
    *gap = 0;
    char* v = gap + 1;
    while (*v == ' ') v++;
    v[strcspn(v, "\n")] = 0;
    snprintf(s->keys[s->n], sizeof s->keys[0], "%s", k);
    snprintf(s->vals[s->n], sizeof s->vals[0], "%s", v);
    s->n++;
  }
  fclose(f);
}

// Runs argv with GOSHIM_MODE=mode, its summary going to stats_path.
int run_mode(char** argv, const char* mode, const char* stats_path) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) die("cannot fork: %s", strerror(errno));
  if (pid == 0) {
    setenv("GOSHIM_MODE", mode, 1);
    setenv("GOSHIM_STATS_FILE", stats_path, 1);
    execvp(argv[0], argv);
    fprintf(stderr, "goshim: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int compare(char** argv) {
  append_debug("stats=1");
  char dir[] = "/tmp/goshim-compare.XXXXXX";
  if (!mkdtemp(dir)) die("cannot create a temporary directory: %s", strerror(errno));
  char f11[64], fmn[64];
  snprintf(f11, sizeof f11, "%s/1to1", dir);
  snprintf(fmn, sizeof fmn, "%s/mn", dir);
  fprintf(stderr, "goshim --compare: run 1 of 2, GOSHIM_MODE=1:1 (kernel threads)\n");
  int rc11 = run_mode(argv, "1:1", f11);
  fprintf(stderr, "goshim --compare: run 2 of 2, GOSHIM_MODE=M:N (goroutines)\n");
  int rcmn = run_mode(argv, "M:N", fmn);
  Summary a, b;
  read_summary(f11, &a);
  read_summary(fmn, &b);
  unlink(f11);
  unlink(fmn);
  rmdir(dir);
  if (a.n == 0 || b.n == 0) {
    fprintf(stderr, "goshim --compare: no summary from the %s run (did the program exit through exit()?)\n",
            a.n == 0 ? "1:1" : "M:N");
    return rcmn ? rcmn : 1;
  }
  fprintf(stderr, "\n%-24s %22s %22s\n", "", "1:1 (kernel threads)", "M:N (goroutines)");
  for (int i = 0; i < b.n; i++) {
    const char* v = "-";
    for (int j = 0; j < a.n; j++)
      if (strcmp(a.keys[j], b.keys[i]) == 0) v = a.vals[j];
    fprintf(stderr, "%-24s %22s %22s\n", b.keys[i], v, b.vals[i]);
  }
  fprintf(stderr, "%-24s %22d %22d\n", "exit status", rc11, rcmn);
  return rcmn;
}

}  // namespace

int main(int argc, char** argv) {
  const char* lib = nullptr;
  bool do_compare = false;
  int i = 1;
  for (; i < argc; i++) {
    const char* a = argv[i];
    auto need = [&](const char* opt) -> const char* {
      if (i + 1 >= argc) die("option %s needs a value", opt);
      return argv[++i];
    };
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(kUsage, stdout);
      return 0;
    } else if (strcmp(a, "--version") == 0) {
      printf("goshim %s\n", GOSHIM_VERSION);
      return 0;
    } else if (strcmp(a, "--procs") == 0) {
      const char* v = need(a);
      int n;
      if (!goshim::parse_procs(v, &n)) {
        char msg[80];
        snprintf(msg, sizeof msg, "--procs wants a number in 1..%d, not '%%s'", goshim::kMaxProcs);
        die(msg, v);
      }
      setenv("GOSHIM_MAXPROCS", v, 1);
    } else if (strcmp(a, "--stack") == 0) {
      const char* v = need(a);
      size_t bytes;
      if (!goshim::parse_stack_size(v, &bytes))
        die("--stack wants a size of at least 16k such as 256k or 8m, not '%s'", v);
      setenv("GOSHIM_STACK", v, 1);
    } else if (strcmp(a, "--schedtrace") == 0) {
      const char* v = need(a);
      int ms;
      if (!goshim::parse_schedtrace_ms(v, &ms)) {
        char msg[80];
        snprintf(msg, sizeof msg, "--schedtrace wants milliseconds in 1..%ld, not '%%s'", goshim::kMaxDebugMs);
        die(msg, v);
      }
      char kv[64];
      snprintf(kv, sizeof kv, "schedtrace=%s", v);
      append_debug(kv);
    } else if (strcmp(a, "--scheddetail") == 0) {
      append_debug("scheddetail=1");
    } else if (strcmp(a, "--stats") == 0) {
      append_debug("stats=1");
    } else if (strcmp(a, "--trace") == 0) {
      setenv("GOSHIM_TRACE", need(a), 1);
    } else if (strcmp(a, "--no-preempt") == 0) {
      setenv("GOSHIM_PREEMPT", "off", 1);
    } else if (strcmp(a, "--mode") == 0) {
      const char* v = need(a);
      if (strcmp(v, "1:1") != 0 && strcmp(v, "M:N") != 0) die("--mode wants M:N or 1:1, not '%s'", v);
      setenv("GOSHIM_MODE", v, 1);
    } else if (strcmp(a, "--compare") == 0) {
      do_compare = true;
    } else if (strcmp(a, "--lib") == 0) {
      lib = need(a);
    } else if (a[0] == '-') {
      die("unknown option '%s'", a);
    } else {
      break;  // the program (without --)
    }
  }
  if (i >= argc) die("no program given%s", "");

  char path[PATH_MAX];
  if (!lib) {
    if (!find_lib(path, sizeof path)) die("cannot find libgoshim.so next to the launcher%s", "");
    lib = path;
  } else if (!exists(lib)) {
    die("no such library: %s", lib);
  }
  char abs[PATH_MAX];
  if (!realpath(lib, abs)) die("cannot resolve %s", lib);
  const char* old = getenv("LD_PRELOAD");
  char pre[PATH_MAX * 2];
  if (old && *old)
    snprintf(pre, sizeof pre, "%s:%s", abs, old);
  else
    snprintf(pre, sizeof pre, "%s", abs);
  setenv("LD_PRELOAD", pre, 1);

  if (do_compare) {
    if (getenv("GOSHIM_MODE") && strcmp(getenv("GOSHIM_MODE"), "M:N") != 0 &&
        strcmp(getenv("GOSHIM_MODE"), "1:1") != 0)
      unsetenv("GOSHIM_MODE");
    return compare(argv + i);
  }
  execvp(argv[i], argv + i);
  fprintf(stderr, "goshim: cannot run %s: %s\n", argv[i], strerror(errno));
  return errno == ENOENT ? 127 : 126;
}
