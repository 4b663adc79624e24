// Scheduler tracing (see trace.hpp).
#include "core/trace.hpp"

#include <fcntl.h>
#include <atomic>
#include <new>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/ownfd.hpp"
#include "core/rawlog.hpp"
#include "core/runtime.hpp"
#include "syscalls/sys.hpp"

namespace goshim {

bool trace_on = false;

namespace {

struct Ev {
  int64_t ts;
  int64_t dur;
  uint64_t goid;
  uint64_t arg;
  const void* obj;
  const char* name;
  char gname[16];
  int16_t p;
  int16_t m;
  TraceEv ev;
  uint8_t reason;
  uint8_t wait;
};

constexpr uint32_t kBufEvents = 8192;
struct Buf {
  SpinLock flush_lock;
  std::atomic<uint32_t> n{0};
  uint32_t flushed = 0;
  Ev ev[kBufEvents];
};

std::atomic<int> fd{-1};  // goshim's own (core/ownfd.hpp): may move
int64_t t0;
Mutex file_lock{LockRank::TraceFile};
bool first = true;
Buf* nom_buf;  // events from threads without an M (sysmon, foreign)
SpinLock nom_lock;

Buf* new_buf() {
  void* p = sys::mmap(nullptr, sizeof(Buf), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
  return p == MAP_FAILED ? nullptr : new (p) Buf();
}

void emit(const char* s, size_t n) {
  // Locks held: file_lock.
  while (n > 0) {
    long w = sys::write(fd.load(std::memory_order_relaxed), s, n);
    if (w == -4) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

void emit_json(const char* s, size_t n) {
  if (!first) emit(",\n", 2);
  first = false;
  emit(s, n);
}

const char* stop_name(uint8_t r) {
  static const char* const names[] = {"parked", "yielded", "preempted", "blocking call", "exited"};
  return r < 5 ? names[r] : "?";
}

size_t format(const Ev& e, char* out, size_t size) {
  double ts = (e.ts - t0) / 1000.0, dur = e.dur / 1000.0;
  switch (e.ev) {
    case TraceEv::GStop: {
      char args[160];
      if (e.reason == (uint8_t)TraceStop::Park)
        rawfmt(args, sizeof args, "\"stop\":\"parked\",\"on\":\"%s\",\"obj\":\"%p\"",
               wait_reason_name((WaitReason)e.wait), e.obj);
      else if (e.reason == (uint8_t)TraceStop::Blocking)
        rawfmt(args, sizeof args, "\"stop\":\"blocking call\",\"call\":\"%s\"", e.name ? e.name : "?");
      else
        rawfmt(args, sizeof args, "\"stop\":\"%s\"", stop_name(e.reason));
      long us = (long)ts, frac = (long)((ts - us) * 1000);
      long dus = (long)dur, dfrac = (long)((dur - dus) * 1000);
      return rawfmt(out, size,
                    "{\"name\":\"G%lu%s%s\",\"cat\":\"goroutine\",\"ph\":\"X\",\"ts\":%ld.%03ld,"
                    "\"dur\":%ld.%03ld,\"pid\":1,\"tid\":%d,\"args\":{\"goid\":%lu,%s}}",
                    (unsigned long)e.goid, e.gname[0] ? " " : "", e.gname, us, frac, dus, dfrac, e.p, (unsigned long)e.goid,
                    args);
    }
    case TraceEv::BlockBegin: {
      long us = (long)ts, frac = (long)((ts - us) * 1000);
      long dus = (long)dur, dfrac = (long)((dur - dus) * 1000);
      return rawfmt(out, size,
                    "{\"name\":\"%s\",\"cat\":\"blocking\",\"ph\":\"X\",\"ts\":%ld.%03ld,"
                    "\"dur\":%ld.%03ld,\"pid\":2,\"tid\":%d,\"args\":{\"goid\":%lu}}",
                    e.name ? e.name : "?", us, frac, dus, dfrac, e.m, (unsigned long)e.goid);
    }
    default: {
      static const char* const names[] = {"create", "start", "stop", "ready", "steal",
                                          "preempt", "block", "unblock", "handoff", "stuck-thread"};
      long us = (long)ts, frac = (long)((ts - us) * 1000);
      bool on_p = e.p >= 0 && e.ev != TraceEv::Handoff && e.ev != TraceEv::Stall;
      return rawfmt(out, size,
                    "{\"name\":\"%s\",\"cat\":\"sched\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%ld.%03ld,"
                    "\"pid\":%d,\"tid\":%d,\"args\":{\"goid\":%lu,\"arg\":%lu}}",
                    names[(int)e.ev], us, frac, on_p ? 1 : 2, on_p ? e.p : (e.m >= 0 ? e.m : 999),
                    (unsigned long)e.goid, (unsigned long)e.arg);
    }
  }
}

void flush(Buf* b) {
  b->flush_lock.lock();
  uint32_t n = b->n.load(std::memory_order_acquire);
  if (b->flushed < n) {
    file_lock.lock();
    char line[512];
    for (uint32_t i = b->flushed; i < n; i++) {
      size_t len = format(b->ev[i], line, sizeof line);
      emit_json(line, len);
    }
    file_lock.unlock();
  }
  b->flushed = 0;
  b->n.store(0, std::memory_order_release);
  b->flush_lock.unlock();
}

void append(Buf* b, const Ev& e) {
  uint32_t n = b->n.load(std::memory_order_relaxed);
  if (n >= kBufEvents) {
    flush(b);
    n = 0;
  }
  b->ev[n] = e;
  b->n.store(n + 1, std::memory_order_release);
}

void at_exit() { trace_flush_all(); }

}  // namespace

void trace_init(const char* path) {
  long f = sys::openat(-100, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f < 0) {
    rawlog("goshim: GOSHIM_TRACE: cannot open %s; tracing off\n", path);
    return;
  }
  fd.store(ownfd_place((int)f), std::memory_order_relaxed);
  ownfd_add(&fd);
  t0 = sys::nanotime();
  nom_buf = new_buf();
  static const char head[] = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  emit(head, sizeof head - 1);
  first = true;
  char line[160];
  size_t n = rawfmt(line, sizeof line,
                    "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"processors (P)\"}}");
  emit_json(line, n);
  n = rawfmt(line, sizeof line,
             "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"args\":{\"name\":\"kernel threads (M)\"}}");
  emit_json(line, n);
  trace_on = true;
  atexit(at_exit);
}

void trace_event_slow(TraceEv ev, G* gp, uint64_t arg, const void* obj, const char* name) {
  G* cur = tls_g;
  M* mp = cur ? cur->m : nullptr;
  int64_t now = sys::nanotime();
  if (ev == TraceEv::GStart) {
    gp->trace_start = now;
    gp->trace_p = mp && mp->p ? (int16_t)mp->p->id : -1;
    return;
  }
  if (ev == TraceEv::BlockBegin) {
    gp->trace_block_start = now;
    return;
  }
  Ev e;
  memset(&e, 0, sizeof e);
  e.ts = now;
  e.ev = ev;
  e.goid = gp ? gp->goid : 0;
  e.arg = arg;
  e.obj = obj;
  e.name = name;
  e.m = mp ? (int16_t)mp->id : -1;
  e.p = mp && mp->p ? (int16_t)mp->p->id : -1;
  if (ev == TraceEv::GStop) {
    if (!gp->trace_start) return;
    e.ts = gp->trace_start;
    e.dur = now - gp->trace_start;
    e.p = gp->trace_p;
    e.reason = (uint8_t)arg;
    e.wait = (uint8_t)gp->waitreason;
    e.name = gp->blocking_what;
    for (size_t i = 0; i + 1 < sizeof e.gname && gp->name[i]; i++) {
      char c = gp->name[i];  // keep the JSON valid whatever the program named it
      e.gname[i] = (c == '"' || c == '\\' || (unsigned char)c < 0x20) ? '_' : c;
    }
    gp->trace_start = 0;
  } else if (ev == TraceEv::BlockEnd) {
    if (!gp->trace_block_start) return;
    e.ev = TraceEv::BlockBegin;  // one complete slice on the M's track
    e.name = gp->blocking_what;
    e.ts = gp->trace_block_start;
    e.dur = now - gp->trace_block_start;
    gp->trace_block_start = 0;
  }
  if (mp) {
    if (!mp->tracebuf) mp->tracebuf = new_buf();
    if (mp->tracebuf) append((Buf*)mp->tracebuf, e);
  } else if (nom_buf) {
    nom_lock.lock();
    append(nom_buf, e);
    nom_lock.unlock();
  }
}

void trace_flush_all() {
  if (!trace_on) return;
  trace_on = false;
  for (M* mp = allm_head(); mp; mp = mp->alllink)
    if (mp->tracebuf) flush((Buf*)mp->tracebuf);
  if (nom_buf) flush(nom_buf);
  file_lock.lock();
  char line[160];
  for (int i = 0; i < sched.gomaxprocs; i++) {
    size_t n = rawfmt(line, sizeof line,
                      "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"P%d\"}}",
                      i, i);
    emit_json(line, n);
  }
  for (M* mp = allm_head(); mp; mp = mp->alllink) {
    size_t n = rawfmt(line, sizeof line,
                      "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":%d,\"args\":{\"name\":\"M%d (tid %d)\"}}",
                      mp->id, mp->id, (int)mp->tid);
    emit_json(line, n);
  }
  emit("\n]}\n", 4);
  file_lock.unlock();
}

}  // namespace goshim
