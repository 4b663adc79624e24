#!/usr/bin/env bash
# The deadlock report fires when no goroutine can ever run again, and
# never for a program that is merely idle (network input, a timer, a
# child, a signal; accept, read, poll, epoll_wait, sleep).
. "$(dirname "$0")/lib.sh"

for procs in 1 2; do
  for what in mutexes cond; do
    timeout -s KILL 30 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs "$BIN/obs_deadlock" $what \
      >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc = 2 ] || fail "$what at $procs procs: exit status $rc, want 2"
    contains "$T/err" '^goshim: all goroutines are asleep - deadlock!$' "$what: the report"
    contains "$T/err" '^goroutine 1 \[pthread_join' "$what: main's state in the dump"
  done
  # Both lock-order threads wait on a mutex; the condvar waiter on its cond.
  timeout -s KILL 30 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs "$BIN/obs_deadlock" mutexes >/dev/null 2>"$T/err"
  [ "$(grep -Ec '^goroutine [0-9]+ \[mutex ' "$T/err")" = 2 ] || fail "mutexes: want two Gs waiting on a mutex"
  grep -A12 -E '^goroutine [0-9]+ \[mutex ' "$T/err" | grep -Eq '\b(ab|ba)\b' ||
    fail "mutexes: backtraces do not name ab/ba"
  timeout -s KILL 30 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs "$BIN/obs_deadlock" cond >/dev/null 2>"$T/err"
  contains "$T/err" '^goroutine [0-9]+ \[cond ' "cond: the waiter's state"

  # Disabled by GOSHIM_DEBUG=deadlock=0: the program just hangs.
  timeout -s KILL 3 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs GOSHIM_DEBUG=deadlock=0 \
    "$BIN/obs_deadlock" cond >"$T/out" 2>"$T/err"
  rc=$?
  [ $rc = 137 ] || fail "deadlock=0: exit status $rc, want 137 (killed by the timeout)"
  lacks "$T/err" 'deadlock!' "deadlock=0"

  # Idle, not dead: killed by the timeout after 3 s, no report.
  for what in accept sleep child sigwait read poll epoll; do
    timeout -s KILL 3 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs "$BIN/obs_deadlock" $what \
      >"$T/out" 2>"$T/err"
    rc=$?
    contains "$T/out" "^start $what\$" "$what started"
    [ $rc = 137 ] || fail "$what at $procs procs: exit status $rc, want 137 (still waiting at the timeout)"
    lacks "$T/err" 'deadlock!' "$what at $procs procs"
  done
done
done_test
