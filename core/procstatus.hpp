// The one reader of /proc status files ("Key:\tvalue" lines): a process's
// or a kernel thread's SigQ, SigPnd, SigBlk, State, Threads.
//
// The file is read in small pieces on goshim's privfd thread (its own fd
// table, core/privfd.hpp) and each wanted line is parsed as it passes:
// nothing depends on the file's size (a Groups: line of a few hundred
// supplementary groups pushed SigPnd: past a 4 KiB buffer, which then
// read as "nothing pending"), and a caller's stack holds 64 bytes of line,
// not the whole file: the readers run inside goshim's signal handler,
// which may be on a program's small sigaltstack.
#pragma once

#include <stdint.h>

namespace goshim {

struct StatusField {
  const char* key;  // the text before the colon: "SigPnd", "Threads"
  int base;         // 10 or 16; 0 for the value's first character (State)
  uint64_t value;   // out
  bool found;       // out
};

// Signal-safe, any thread. Fills the fields of the status file at path
// (up to 8). Returns false if the file cannot be read (no /proc, or a
// /proc of another pid namespace for a task path).
bool proc_status(const char* path, StatusField* fields, int n);

// One field of /proc/self/task/TID/status; false if unreadable or absent.
bool task_status(long tid, const char* key, int base, uint64_t* out);

}  // namespace goshim
