#!/usr/bin/env bash
# Pinning report (GOSHIM_DEBUG=pinned=MS): a goroutine that keeps its
# kernel thread blocked where goshim cannot see it (a read system call made
# by an inline syscall instruction) for longer than MS is named, with what
# it is blocked in and a backtrace naming its function; the program keeps
# running (main runs meanwhile and ends the block). Counted in schedtrace.
. "$(dirname "$0")/lib.sh"

for procs in 1 2; do
  timeout -s KILL 20 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs \
    GOSHIM_DEBUG=pinned=100,schedtrace=50 "$BIN/obs_pinned" >"$T/out" 2>"$T/err"
  rc=$?
  [ $rc = 0 ] || fail "p$procs: exit status $rc"
  contains "$T/out" '^joined ok$' "p$procs: the blocked thread got its byte"
  contains "$T/err" '^goshim: pinned: goroutine [0-9]+ "reader" has held M[0-9]+ for [0-9]+ ms, blocked in system call 0 \(read\)' \
    "p$procs: the report names the G and the system call"
  [ "$(grep -c '^goshim: pinned:' "$T/err")" = 1 ] || fail "p$procs: one report per stall expected"
  awk '/^goshim: pinned:/{f=1} f&&/^$/{exit} f' "$T/err" >"$T/one"
  contains "$T/one" '^  stuck_in_raw_read\+0x[0-9a-f]+$' "p$procs: the backtrace names the function that blocked"
  contains "$T/one" '^created by goroutine 1$' "p$procs: the creator"
  contains "$T/err" '^SCHED [0-9]+ms: .* pinned=[1-9]' "p$procs: schedtrace counts the stall"
  # The stall (about 400 ms; far less than the threshold even on a loaded
  # machine) is shorter than the threshold: no report.
  timeout -s KILL 20 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs \
    GOSHIM_DEBUG=pinned=60000 "$BIN/obs_pinned" >"$T/out" 2>"$T/err" || fail "p$procs: pinned=60000 run failed"
  lacks "$T/err" '^goshim: pinned:' "p$procs: a stall under the threshold reported with pinned=60000"
done
done_test
