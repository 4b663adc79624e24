#!/usr/bin/env bash
# GOSHIM_TRACE=FILE: valid Chrome trace-event JSON, one track per P and per
# M, goroutine slices named by thread name, the promised event kinds.
. "$(dirname "$0")/lib.sh"
here=$(dirname "$0")

# 2 processors: creations, parks, exits, blocking calls, named threads.
under_goshim 2 GOSHIM_TRACE="$T/t2.json" "$BIN/obs_workers" 6 300 >"$T/out" 2>"$T/err" ||
  fail "obs_workers exit status $?"
contains "$T/out" '^done 6$' "program result"
python3 "$here/check_trace.py" "$T/t2.json" 2 worker-0 worker-5 syncer || fail "trace at 2 processors"

# 1 processor, 4 computing threads: preemptions show up.
under_goshim 1 GOSHIM_TRACE="$T/t1.json" "$BIN/obs_workers" 4 300 >"$T/out" 2>"$T/err" ||
  fail "obs_workers exit status $?"
python3 "$here/check_trace.py" "$T/t1.json" 1 worker-1 'preempt!' || fail "trace at 1 processor"

# An unwritable path: a one-line warning, the program still runs.
under_goshim 2 GOSHIM_TRACE=/nonexistent/dir/t.json "$BIN/obs_workers" 2 50 >"$T/out" 2>"$T/err" ||
  fail "obs_workers with a bad trace path: exit status $?"
contains "$T/err" 'GOSHIM_TRACE: cannot open' "warning for an unwritable trace file"
done_test
