#!/usr/bin/env bash
# The deadlock report fires when no goroutine can ever run again, and
# never for a program that is merely idle (network input, a timer, a
# child, a signal; accept, read, poll, epoll_wait, sleep). By default the
# program keeps waiting after the report (something outside may still
# end it, as natively); GOSHIM_DEBUG=deadlock=fatal exits with status 2.
. "$(dirname "$0")/lib.sh"

for procs in 1 2; do
  for what in mutexes cond; do
    # Default: the report, once, and the program keeps waiting.
    env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs "$BIN/obs_deadlock" $what >"$T/out" 2>"$T/err" &
    pid=$!
    wait_for "$T/err" 'keeps waiting' 20 || fail "$what at $procs procs: no report"
    sleep 1  # ten more checks: still one report
    kill -0 $pid 2>/dev/null || fail "$what at $procs procs: the program ended after the report"
    kill -KILL $pid 2>/dev/null
    wait $pid 2>/dev/null
    [ "$(grep -c 'all goroutines are asleep' "$T/err")" = 1 ] || fail "$what at $procs procs: want one report"
    contains "$T/err" '^goroutine 1 \[pthread_join' "$what: main's state in the dump"
    # deadlock=fatal: the report, then exit status 2.
    timeout -s KILL 30 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs GOSHIM_DEBUG=deadlock=fatal \
      "$BIN/obs_deadlock" $what >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc = 2 ] || fail "$what at $procs procs, deadlock=fatal: exit status $rc, want 2"
    contains "$T/err" '^goshim: all goroutines are asleep - deadlock!$' "$what: the report"
    contains "$T/err" '^goroutine 1 \[pthread_join' "$what: main's state in the dump"
    lacks "$T/err" 'keeps waiting' "$what, deadlock=fatal"
  done
  # Both lock-order threads wait on a mutex; the condvar waiter on its cond.
  timeout -s KILL 30 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs GOSHIM_DEBUG=deadlock=fatal \
    "$BIN/obs_deadlock" mutexes >/dev/null 2>"$T/err"
  [ "$(grep -Ec '^goroutine [0-9]+ \[mutex ' "$T/err")" = 2 ] || fail "mutexes: want two Gs waiting on a mutex"
  grep -A12 -E '^goroutine [0-9]+ \[mutex ' "$T/err" | grep -Eq '\b(ab|ba)\b' ||
    fail "mutexes: backtraces do not name ab/ba"
  timeout -s KILL 30 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs GOSHIM_DEBUG=deadlock=fatal \
    "$BIN/obs_deadlock" cond >/dev/null 2>"$T/err"
  contains "$T/err" '^goroutine [0-9]+ \[cond ' "cond: the waiter's state"

  # Disabled by GOSHIM_DEBUG=deadlock=0: the program just hangs.
  timeout -s KILL 3 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs GOSHIM_DEBUG=deadlock=0 \
    "$BIN/obs_deadlock" cond >"$T/out" 2>"$T/err"
  rc=$?
  [ $rc = 137 ] || fail "deadlock=0: exit status $rc, want 137 (killed by the timeout)"
  lacks "$T/err" 'deadlock!' "deadlock=0"

  # A pending alarm ends the relock by SIGALRM's default action, as
  # natively, even with deadlock=fatal, and nothing is reported.
  timeout -s KILL 10 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs GOSHIM_DEBUG=deadlock=fatal \
    "$BIN/obs_deadlock" alarm >"$T/out" 2>"$T/err"
  rc=$?
  [ $rc = 142 ] || fail "alarm at $procs procs: exit status $rc, want 142 (SIGALRM)"
  lacks "$T/err" 'deadlock!' "alarm at $procs procs"

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
