#!/usr/bin/env bash
# Goroutine dump on SIGQUIT (and on GOSHIM_DEBUG=dumpsignal=SIG): every G
# with its state — mutex, condvar, socket read with its fd, sleep — how
# long it waited, its creator and a backtrace naming the function that
# blocked (obs_states is built with -g; the symbols come from its symtab). The program keeps running.
. "$(dirname "$0")/lib.sh"

# dump_complete FILE : FILE (one dump) shows all four Gs in their waits,
# each with its creator line, and main in sigwait with its frame.
dump_complete() {
  local f=$1 st
  for st in 'mutex 0x' 'cond 0x' 'IO wait \(read\)' 'sleep,' ; do
    grep -Eq "^goroutine [0-9]+ \[$st" "$f" || return 1
  done
  grep -Eq '^goroutine 1 \[sigwait' "$f" && grep -Eq '^  main\+0x' "$f" &&
    [ "$(grep -c '^created by goroutine 1$' "$f")" -ge 4 ]
}

# dump_run PROCS SIGNAL [env...] : runs obs_states, sends SIGNAL once it
# has started its threads, then SIGTERM; the last dump ends up in $T/dump.
# No sleep decides anything: obs_states' Gs are parked, so the only way to
# see that all four reached their waits (and main its sigwait) is the dump
# itself. The signal is sent again until one dump shows them all; each
# dump must be complete before the next signal, and 0.25 s between dumps
# only paces the resend (at most 80 dumps, some 20 s).
dump_run() {
  local procs=$1 sig=$2 n i
  shift 2
  : >"$T/out"
  : >"$T/dump"
  env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS="$procs" "$@" "$BIN/obs_states" >"$T/out" 2>"$T/err" &
  local pid=$!
  wait_for "$T/out" '^ready$' 20 || { fail "obs_states never got ready"; kill -9 $pid; wait $pid; return; }
  for ((n = 1; n <= 80; n++)); do
    kill -s "$sig" $pid
    # the n-th dump has begun ...
    for ((i = 0; i < 200; i++)); do
      [ "$(grep -c '^goshim: goroutine dump' "$T/err")" -ge $n ] && break
      sleep 0.05
    done
    [ $i = 200 ] && { fail "no dump after SIG$sig (number $n)"; break; }
    # ... and ends: its last line is the blank line after a G's creator
    # (the dump of main, G 1, has no creator line).
    for ((i = 0; i < 200; i++)); do
      awk -v n=$n '/^goshim: goroutine dump/{k++} k==n' "$T/err" >"$T/dump"
      [ "$(tail -n 2 "$T/dump" | head -n 1)" = "created by goroutine 1" ] && [ -z "$(tail -n 1 "$T/dump")" ] && break
      sleep 0.05
    done
    dump_complete "$T/dump" && break
    sleep 0.25
  done
  [ $n -gt 80 ] && fail "80 dumps, none with all four Gs waiting and main in sigwait"
  kill -TERM $pid
  wait $pid
  local rc=$?
  # exit 0 (sigwait returned SIGTERM) also proves that every dump signal
  # left the program running.
  [ $rc = 0 ] || fail "obs_states exit status $rc after SIGTERM (did not survive the dump?)"
}

check_dump() {
  local e=$T/dump
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
