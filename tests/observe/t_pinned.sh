#!/usr/bin/env bash
# Pinning report (GOSHIM_DEBUG=pinned=MS): a goroutine that keeps its
# kernel thread blocked where goshim cannot see it (a read system call made
# by an inline syscall instruction) for longer than MS is named, with what
# it is blocked in and a backtrace naming its function; the program keeps
# running (main runs meanwhile and ends the block). Counted in schedtrace.
# The stall lasts until this script has seen the report and a schedtrace
# line counting it (obs_pinned stdin: main ends the block when a byte
# arrives on its standard input), so no timing decides the result.
. "$(dirname "$0")/lib.sh"

for procs in 1 2; do
  rm -f "$T/fifo" "$T/out" "$T/err" && mkfifo "$T/fifo" # no earlier run's lines
  timeout -s KILL 90 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs \
    GOSHIM_DEBUG=pinned=100,schedtrace=50 "$BIN/obs_pinned" stdin <"$T/fifo" >"$T/out" 2>"$T/err" &
  pid=$!
  exec 3>"$T/fifo"
  wait_for "$T/out" '^reader blocked$' 30 || fail "p$procs: main did not see the reader block in 30 s"
  wait_for "$T/err" '^goshim: pinned:' 30 || fail "p$procs: no pinning report 30 s into the stall"
  # The backtrace follows the header: the report is whole at its blank line.
  wait_for "$T/err" '^$' 30 || fail "p$procs: the pinning report did not end 30 s after its first line"
  wait_for "$T/err" '^SCHED [0-9]+ms: .* pinned=[1-9]' 30 || fail "p$procs: no schedtrace line counts the stall in 30 s"
  (trap "" PIPE; echo x >&3) 2>/dev/null
  exec 3>&-
  wait $pid
  rc=$?
  [ $rc = 0 ] || fail "p$procs: exit status $rc"
  contains "$T/out" '^main ran$' "p$procs: main ran while the reader was blocked"
  contains "$T/out" '^joined ok$' "p$procs: the blocked thread got its byte"
  contains "$T/err" '^goshim: pinned: goroutine [0-9]+ "reader" has held M[0-9]+ for [0-9]+ ms, blocked in system call 0 \(read\)' \
    "p$procs: the report names the G and the system call"
  [ "$(grep -c '^goshim: pinned:' "$T/err")" = 1 ] || fail "p$procs: one report per stall expected"
  awk '/^goshim: pinned:/{f=1} f&&/^$/{exit} f' "$T/err" >"$T/one"
  contains "$T/one" '^  stuck_in_raw_read\+0x[0-9a-f]+$' "p$procs: the backtrace names the function that blocked"
  contains "$T/one" '^created by goroutine 1$' "p$procs: the creator"
  # A stall shorter than the threshold (about 400 ms after the read began;
  # the threshold is 60 s): no report.
  timeout -s KILL 60 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs \
    GOSHIM_DEBUG=pinned=60000 "$BIN/obs_pinned" >"$T/out" 2>"$T/err" || fail "p$procs: pinned=60000 run failed"
  contains "$T/out" '^joined ok$' "p$procs: pinned=60000: the blocked thread got its byte"
  lacks "$T/err" '^goshim: pinned:' "p$procs: a stall under the threshold reported with pinned=60000"
done
done_test
