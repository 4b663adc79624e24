#!/usr/bin/env bash
# The goshim launcher: flags, errors, exit status, modes, --compare.
. "$(dirname "$0")/lib.sh"
G=$LAUNCHER
P=$BIN/obs_exit

# expect_status STATUS cmd... : runs cmd (stdout/stderr to $T/out, $T/err)
expect_status() {
  local want=$1
  shift
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  [ "$rc" = "$want" ] || { fail "$*: exit status $rc, want $want"; sed 's/^/      | /' "$T/err" | head -n 10; }
}

expect_status 0 "$G" --version
contains "$T/out" '^goshim [0-9]+\.[0-9]+\.[0-9]+' "--version"
expect_status 0 "$G" --help
contains "$T/out" '^usage: goshim ' "--help usage line"
for opt in --procs --stack --schedtrace --trace --no-preempt --mode --compare --stats; do
  contains "$T/out" "^  $opt" "--help documents $opt"
done

# Bad flags and values: exit 2 with a message naming the problem.
expect_status 2 "$G" --bogus -- "$P" 0
contains "$T/err" "unknown option '--bogus'" "unknown option message"
expect_status 2 "$G" --procs zero -- "$P" 0
contains "$T/err" "--procs wants a number" "bad --procs message"
expect_status 2 "$G" --procs 0 -- "$P" 0
# --procs and --schedtrace take what GOSHIM_MAXPROCS and schedtrace= take
# (core/numparse.hpp, tests/unit/numparse_test.cpp): no wrap, no space.
expect_status 2 "$G" --procs 4294967297 -- "$P" 0
expect_status 2 "$G" --procs " 2" -- "$P" 0
expect_status 2 "$G" --schedtrace 4000000 -- "$P" 0
contains "$T/err" "--schedtrace wants milliseconds in 1\.\.3600000" "bad --schedtrace message"
expect_status 2 "$G" --stack 12q -- "$P" 0
contains "$T/err" "--stack wants a size" "bad --stack message"
expect_status 2 "$G" --mode 2:3 -- "$P" 0
contains "$T/err" "--mode wants" "bad --mode message"
expect_status 2 "$G" --schedtrace -- "$P" 0
expect_status 2 "$G" --procs
contains "$T/err" "needs a value" "missing value message"
expect_status 2 "$G"
contains "$T/err" "no program given" "no program message"
expect_status 127 "$G" -- /nonexistent/program
contains "$T/err" "cannot run /nonexistent/program" "missing program message"
expect_status 2 "$G" --lib /nonexistent.so -- "$P" 0
contains "$T/err" "no such library" "bad --lib message"

# The program's exit status passes through, death by a signal too.
expect_status 0 "$G" -- "$P" 0
expect_status 7 "$G" -- "$P" 7
expect_status 7 "$G" "$P" 7  # without --
expect_status $((128 + 15)) "$G" -- "$P" kill 15

# Flags reach the program's environment and the runtime.
"$G" --procs 3 -- "$P" env GOSHIM_MAXPROCS >"$T/out" 2>&1
contains "$T/out" '^3$' "--procs sets GOSHIM_MAXPROCS"
# (the program sleeps until this script has seen a line: no time bound)
"$G" --procs 1 --schedtrace 20 -- "$P" sleep 600000 >"$T/out" 2>"$T/err" &
pid=$!
wait_for "$T/err" '^SCHED [0-9]+ms: gomaxprocs=1 ' 60 || fail "--procs 1 --schedtrace 20: no SCHED line in 60 s"
kill -TERM $pid
wait $pid
contains "$T/err" '^SCHED [0-9]+ms: gomaxprocs=1 ' "--procs 1 --schedtrace 20"
"$G" --stack 256k -- "$P" stack >"$T/out" 2>&1
contains "$T/out" '^262144$' "--stack 256k is the default thread stack size"
"$G" --no-preempt -- "$P" env GOSHIM_PREEMPT >"$T/out" 2>&1
contains "$T/out" '^off$' "--no-preempt"
"$G" --trace "$T/t.json" -- "$P" threads 10 >"$T/out" 2>&1 || fail "--trace run failed"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/t.json" || fail "--trace wrote invalid JSON"
env LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6 "$G" -- "$P" env LD_PRELOAD >"$T/out" 2>&1
contains "$T/out" 'libgoshim\.so:/lib/x86_64-linux-gnu/libm\.so\.6$' "an existing LD_PRELOAD is kept"

# M:N keeps 1000 live threads on a few kernel threads; 1:1 does not.
"$G" --procs 2 -- "$P" threads 1000 >"$T/out" 2>&1 || fail "M:N threads run failed"
k=$(awk '/^kernel threads/{print $3}' "$T/out")
[ -n "$k" ] && [ "$k" -le 6 ] || fail "M:N: $k kernel threads for 1000 live threads"
"$G" --mode 1:1 --stats -- "$P" threads 1000 >"$T/out" 2>"$T/err" || fail "1:1 threads run failed"
k=$(awk '/^kernel threads/{print $3}' "$T/out")
[ -n "$k" ] && [ "$k" -ge 1001 ] || fail "1:1: $k kernel threads for 1000 live threads"
contains "$T/err" '^goshim stats \(1:1\):' "--stats in 1:1 mode"
contains "$T/err" '^  peak kernel threads +100[0-9]$' "1:1 stats count the kernel threads"

# --compare: both runs, one table; the status is the M:N run's.
expect_status 0 "$G" --procs 2 --compare -- "$P" threads 500
[ "$(grep -c '^kernel threads' "$T/out")" = 2 ] || fail "--compare did not run the program twice"
contains "$T/err" '1:1 \(kernel threads\) +M:N \(goroutines\)' "--compare table header"
contains "$T/err" '^threads created +500 +500$' "--compare: threads created"
line=$(grep '^peak kernel threads' "$T/err")
read -r _ _ _ k11 kmn <<<"$line"
[ "${k11:-0}" -ge 501 ] && [ "${kmn:-999}" -le 6 ] || fail "--compare peak kernel threads: $line"
for key in 'peak live threads' 'voluntary switches' 'involuntary switches' 'peak RSS' 'wall time' \
  'CPU time' 'goroutine parks' 'steals' 'processor handoffs' 'preemptions'; do
  contains "$T/err" "^$key " "--compare row '$key'"
done
expect_status 9 "$G" --compare -- "$P" 9
done_test
