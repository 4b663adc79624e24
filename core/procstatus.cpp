#include "core/procstatus.hpp"

#include <fcntl.h>

#include "core/privfd.hpp"
#include "core/rawlog.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

constexpr int kMaxFields = 8;
constexpr int kLineHead = 64;  // enough for any wanted key and its value

struct Scan {
  const char* path;
  StatusField* f;
  int n;
};

uint64_t parse_value(const char* p, int base) {
  while (*p == ' ' || *p == '\t') p++;
  if (base == 0) return (unsigned char)*p;
  uint64_t v = 0;
  for (;; p++) {
    int d = *p >= '0' && *p <= '9'                ? *p - '0'
            : base == 16 && *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                                                   : -1;
    if (d < 0) return v;
    v = v * (uint64_t)base + (uint64_t)d;
  }
}

void line_done(Scan* s, char* line, int len) {
  line[len] = 0;
  for (int i = 0; i < s->n; i++) {
    StatusField& f = s->f[i];
    int k = 0;
    while (f.key[k] && f.key[k] == line[k]) k++;
    if (f.key[k] || line[k] != ':') continue;
    f.value = parse_value(line + k + 1, f.base);
    f.found = true;
  }
}

// On the privfd thread (or the caller): only system calls.
long scan_fn(void* arg) {
  Scan* s = (Scan*)arg;
  long fd = sys::openat(AT_FDCWD, s->path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return fd;
  char chunk[256], line[kLineHead + 1];
  int len = 0;
  long n, r = 0;
  while ((n = sys::read((int)fd, chunk, sizeof chunk)) > 0) {
    for (long i = 0; i < n; i++) {
      if (chunk[i] == '\n') {
        line_done(s, line, len);
        len = 0;
      } else if (len < kLineHead) {
        line[len++] = chunk[i];  // the rest of a long line is not wanted
      }
    }
  }
  if (n < 0) r = n;
  if (len) line_done(s, line, len);
  sys::close((int)fd);
  return r;
}

}  // namespace

bool proc_status(const char* path, StatusField* fields, int n) {
  if (n > kMaxFields) n = kMaxFields;
  for (int i = 0; i < n; i++) fields[i].found = false;
  Scan s = {path, fields, n};
  return privfd_run(scan_fn, &s) == 0;
}

bool task_status(long tid, const char* key, int base, uint64_t* out) {
  char path[48];
  rawfmt(path, sizeof path, "/proc/self/task/%ld/status", tid);
  StatusField f = {key, base, 0, false};
  if (!proc_status(path, &f, 1) || !f.found) return false;
  *out = f.value;
  return true;
}

}  // namespace goshim
