// GOSHIM_TRACE=FILE: scheduler events as Chrome trace-event JSON, which
// Perfetto UI (ui.perfetto.dev) and chrome://tracing open directly.
//
// Tracks: process "processors" has one thread per P, where each goroutine's
// time on that P is a slice named "G<id> <thread name>" (its args say why
// it stopped: parked and on what, yielded, preempted, blocking call,
// exited); process "kernel threads" has one thread per M, with a slice for
// each blocking call and instants for handoffs and stuck-thread
// replacements. Creations, readies, steals and preemptions are instants.
//
// Events go to a buffer of the M that produces them (no locks, no
// allocation); a full buffer is converted and written to the file by that
// M, the rest at exit. When tracing is off each hook costs one predictable
// branch on a global flag.
#pragma once

#include <stdint.h>

#include "core/gmp.hpp"

namespace goshim {

extern bool trace_on;  // set once at init

enum class TraceEv : uint8_t {
  GCreate,     // arg: new goid
  GStart,      // the G starts running on the M's P
  GStop,       // arg: TraceStop reason; obj: what it waits on
  GReady,      // arg: goid readied
  Steal,       // arg: victim P id
  Preempt,     // arg: goid
  BlockBegin,  // name: the call
  BlockEnd,
  Handoff,     // arg: P id handed off
  Stall,       // arg: P id replaced
};

enum class TraceStop : uint8_t { Park, Yield, Preempt, Blocking, Exit };

void trace_init(const char* path);
void trace_event_slow(TraceEv ev, G* gp, uint64_t arg, const void* obj, const char* name);
void trace_flush_all();  // at exit

inline void trace_ev(TraceEv ev, G* gp, uint64_t arg = 0, const void* obj = nullptr,
                     const char* name = nullptr) {
  if (__builtin_expect(trace_on, 0)) trace_event_slow(ev, gp, arg, obj, name);
}

}  // namespace goshim
