// Allocation-free formatted logging (see rawlog.hpp).
#include "core/rawlog.hpp"

#include <signal.h>
#include <stdint.h>

#include "core/signal.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

namespace {

struct Out {
  char* buf;
  size_t size;
  size_t len;
  void put(char c) {
    if (len + 1 < size) buf[len] = c;
    len++;
  }
  void pad(size_t n, char c) {
    while (n-- > 0) put(c);
  }
};

void put_str(Out& o, const char* s, int width, bool left) {
  if (!s) s = "(null)";
  size_t n = 0;
  while (s[n]) n++;
  if (!left && width > (int)n) o.pad(width - n, ' ');
  for (size_t i = 0; i < n; i++) o.put(s[i]);
  if (left && width > (int)n) o.pad(width - n, ' ');
}

void put_num(Out& o, uint64_t v, bool neg, unsigned base, int width, bool left, char padc,
             const char* prefix) {
  char tmp[24];
  int n = 0;
  do {
    unsigned d = v % base;
    tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
    v /= base;
  } while (v);
  int plen = 0;
  while (prefix && prefix[plen]) plen++;
  int total = n + (neg ? 1 : 0) + plen;
  if (!left && padc == ' ' && width > total) o.pad(width - total, ' ');
  if (neg) o.put('-');
  for (int i = 0; i < plen; i++) o.put(prefix[i]);
  if (!left && padc == '0' && width > total) o.pad(width - total, '0');
  while (n > 0) o.put(tmp[--n]);
  if (left && width > total) o.pad(width - total, ' ');
}

}  // namespace

size_t rawfmt(char* buf, size_t size, const char* fmt, va_list ap) {
  Out o{buf, size, 0};
  for (const char* p = fmt; *p; p++) {
    if (*p != '%') {
      o.put(*p);
      continue;
    }
    p++;
    bool left = false;
    char padc = ' ';
    if (*p == '-') {
      left = true;
      p++;
    }
    if (*p == '0') {
      padc = '0';
      p++;
    }
    int width = 0;
    while (*p >= '0' && *p <= '9') width = width * 10 + (*p++ - '0');
    bool lng = false;
    while (*p == 'l' || *p == 'z') {
      lng = true;
      p++;
    }
    switch (*p) {
      case 's':
        put_str(o, va_arg(ap, const char*), width, left);
        break;
      case 'c':
        o.put((char)va_arg(ap, int));
        break;
      case 'd': {
        int64_t v = lng ? va_arg(ap, long) : va_arg(ap, int);
        put_num(o, v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v, v < 0, 10, width, left, padc,
                nullptr);
        break;
      }
      case 'u': {
        uint64_t v = lng ? va_arg(ap, unsigned long) : va_arg(ap, unsigned);
        put_num(o, v, false, 10, width, left, padc, nullptr);
        break;
      }
      case 'x': {
        uint64_t v = lng ? va_arg(ap, unsigned long) : va_arg(ap, unsigned);
        put_num(o, v, false, 16, width, left, padc, nullptr);
        break;
      }
      case 'p':
        put_num(o, (uintptr_t)va_arg(ap, void*), false, 16, width, left, padc, "0x");
        break;
      case '%':
        o.put('%');
        break;
      case 0:
        p--;
        break;
      default:
        o.put('%');
        o.put(*p);
        break;
    }
  }
  if (size > 0) buf[o.len < size ? o.len : size - 1] = 0;
  return o.len < size ? o.len : (size ? size - 1 : 0);
}

size_t rawfmt(char* buf, size_t size, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t n = rawfmt(buf, size, fmt, ap);
  va_end(ap);
  return n;
}

static void vlog(int fd, const char* fmt, va_list ap) {
  char buf[512];
  size_t n = rawfmt(buf, sizeof buf, fmt, ap);
  size_t off = 0;
  while (off < n) {
    long w = sys::write(fd, buf + off, n - off);
    if (w == -4 /* EINTR */) continue;
    if (w <= 0) break;
    off += (size_t)w;
  }
}

void rawlog(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(2, fmt, ap);
  va_end(ap);
}

void rawlog_fd(int fd, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fd, fmt, ap);
  va_end(ap);
}

[[noreturn]] static void die() {
  // SIGABRT's default action, without going through libc (which may take
  // locks held by a parked goroutine) and without the program's handler
  // (the runtime that would route it is what failed): the process ends
  // as a crash, with a core dump where RLIMIT_CORE allows, the
  // goroutines' stacks in it (signal_die_default). goshim's own handler,
  // left installed, made it a plain exit with status 134 and ran the
  // program's SIGABRT handler. exit_group only if that did not end it.
  signal_die_default(SIGABRT);
  sys::exit_group(134);
}

void fatal(const char* msg) {
  rawlog("goshim: fatal error: %s\n", msg);
  die();
}

void fatalf(const char* fmt, ...) {
  char buf[400];
  va_list ap;
  va_start(ap, fmt);
  rawfmt(buf, sizeof buf, fmt, ap);
  va_end(ap);
  rawlog("goshim: fatal error: %s\n", buf);
  die();
}

}  // namespace goshim
