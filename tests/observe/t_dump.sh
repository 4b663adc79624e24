#!/usr/bin/env bash
# Goroutine dump on SIGQUIT (and on GOSHIM_DEBUG=dumpsignal=SIG): every G
# with its state — mutex, condvar, socket read with its fd, sleep — how
# long it waited, its creator and a backtrace naming the function that
# blocked (obs_states is built with -g; the symbols come from its symtab). The program keeps running.
. "$(dirname "$0")/lib.sh"

# dump_run PROCS SIGNAL [env...] : runs obs_states, sends SIGNAL once it is
# ready, then SIGTERM; the dump ends up in $T/err.
dump_run() {
  local procs=$1 sig=$2
  shift 2
  : >"$T/out"
  env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS="$procs" "$@" "$BIN/obs_states" >"$T/out" 2>"$T/err" &
  local pid=$!
  wait_for "$T/out" '^ready$' 20 || { fail "obs_states never got ready"; kill -9 $pid; wait $pid; return; }
  sleep 0.3
  kill -s "$sig" $pid
  wait_for "$T/err" '^  blocked_in_sleep\+0x' 10 || fail "no dump after SIG$sig"
  sleep 0.3
  kill -0 $pid 2>/dev/null || fail "the program did not survive the dump"
  kill -TERM $pid
  wait $pid
  local rc=$?
  [ $rc = 0 ] || fail "obs_states exit status $rc after SIGTERM"
}

check_dump() {
  local e=$T/err
  # One goroutine per state, its function in the backtrace just below.
  contains "$e" '^goroutine [0-9]+ \[mutex 0x[0-9a-f]+, [0-9]+ ms\]:' "a G waiting on a mutex"
  contains "$e" '^goroutine [0-9]+ \[cond 0x[0-9a-f]+, [0-9]+ ms\]:' "a G waiting on a condvar"
  local fd
  fd=$(sed -n 's/^reading fd \([0-9]*\)$/\1/p' "$T/out")
  contains "$e" "^goroutine [0-9]+ \\[IO wait \\(read\\), fd $fd, [0-9]+ ms\\]:" "a G waiting to read a socket (fd $fd)"
  contains "$e" '^goroutine [0-9]+ \[sleep, [0-9]+ ms, with timeout\]:' "a G in sleep()"
  contains "$e" '^goroutine 1 \[sigwait' "main in sigwait"
  for pair in 'mutex 0x:blocked_on_mutex' 'cond 0x:blocked_on_cond' \
    'IO wait \(read\):blocked_in_read' 'sleep,:blocked_in_sleep'; do
    state=${pair%%:*} fn=${pair#*:}
    # the goroutine's block: from its header to the blank line after it
    # (through the environment: awk -v would turn '\(' into '(')
    S="$state" awk 'BEGIN{s=ENVIRON["S"]} $0 ~ "^goroutine [0-9]+ \\[" s {f=1} f&&/^$/{exit} f' "$e" >"$T/one"
    contains "$T/one" "$fn" "backtrace of the G in [$state] names $fn"
    contains "$T/one" '^created by goroutine 1$' "creator of the G in [$state]"
  done
  awk '/^goroutine 1 \[/{f=1} f&&/^$/{exit} f' "$e" >"$T/one"
  contains "$T/one" '^  main\+0x[0-9a-f]+$' "main's frame in goroutine 1's backtrace"
}

dump_run 2 QUIT
check_dump
dump_run 1 QUIT
check_dump

# dumpsignal=SIGUSR2 for programs that use SIGQUIT themselves.
dump_run 2 USR2 GOSHIM_DEBUG=dumpsignal=SIGUSR2
check_dump
done_test
