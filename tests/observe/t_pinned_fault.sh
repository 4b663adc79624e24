#!/usr/bin/env bash
# Pinning report over a stack holding odd values (obs_pinned odd-stack): the
# blocked thread's stack, right above the system call's stack pointer,
# holds word pairs that look like frame records whose "return address"
# lies in a page that cannot be read. The report's stack scan must read
# them without faulting: the backtrace names the blocked function (it
# printed "<stack changed while it was read>", the fault guard's answer,
# and a dump racing a late answer from a running goroutine crashed there),
# and the program runs to its end. The stall lasts until this script has
# seen the report (obs_pinned stdin).
. "$(dirname "$0")/lib.sh"

for procs in 1 2; do
  rm -f "$T/fifo" "$T/out" "$T/err" && mkfifo "$T/fifo" # no earlier run's lines
  timeout -s KILL 90 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs \
    GOSHIM_DEBUG=pinned=300 "$BIN/obs_pinned" odd-stack stdin <"$T/fifo" >"$T/out" 2>"$T/err" &
  pid=$!
  exec 3>"$T/fifo"
  wait_for "$T/err" '^goshim: pinned:' 30 || fail "p$procs: no pinning report 30 s into the stall"
  # The header is written before the backtrace is taken from the blocked
  # thread: end the stall only once the report is whole (its blank line),
  # or the backtrace is taken from a thread that has already returned.
  wait_for "$T/err" '^$' 30 || fail "p$procs: the pinning report did not end 30 s after its first line"
  (trap "" PIPE; echo x >&3) 2>/dev/null
  exec 3>&-
  wait $pid
  rc=$?
  [ $rc = 0 ] || fail "p$procs: exit status $rc"
  contains "$T/out" '^joined ok$' "p$procs: the blocked thread got its byte"
  contains "$T/err" '^goshim: pinned: goroutine [0-9]+ "reader" has held M[0-9]+ for [0-9]+ ms, blocked in system call 0 \(read\)' \
    "p$procs: the report names the G and the system call"
  awk '/^goshim: pinned:/{f=1} f&&/^$/{exit} f' "$T/err" >"$T/one"
  contains "$T/one" '^  stuck_in_raw_read\+0x[0-9a-f]+$' "p$procs: the backtrace names the function that blocked"
  lacks "$T/one" 'stack changed while it was read' "p$procs: the scan faulted"
done
done_test
