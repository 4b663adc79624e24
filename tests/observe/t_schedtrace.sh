#!/usr/bin/env bash
# GOSHIM_DEBUG=schedtrace=MS: lines parse, counts fit the known program
# (8 computing threads + 1 syncing + main at 2 processors), scheddetail
# adds P, M and G lines.
. "$(dirname "$0")/lib.sh"

under_goshim 2 GOSHIM_DEBUG=schedtrace=50 "$BIN/obs_workers" 8 800 >"$T/out" 2>"$T/err" ||
  fail "obs_workers exit status $?"
contains "$T/out" '^done 8$' "program result"
re='^SCHED ([0-9]+)ms: gomaxprocs=([0-9]+) idleprocs=([0-9]+) threads=([0-9]+) spinningthreads=([0-9]+) idlethreads=([0-9]+) runqueue=([0-9]+) gcount=([0-9]+) pinned=([0-9]+) \[([0-9 ]*)\]$'
n=0 maxg=0 prev=-1 bad=0
while IFS= read -r line; do
  case $line in SCHED*) ;; *) continue ;; esac
  if [[ ! $line =~ $re ]]; then
    fail "unparsable: $line"
    continue
  fi
  n=$((n + 1))
  t=${BASH_REMATCH[1]} procs=${BASH_REMATCH[2]} idle=${BASH_REMATCH[3]} thr=${BASH_REMATCH[4]}
  spin=${BASH_REMATCH[5]} idlem=${BASH_REMATCH[6]} gq=${BASH_REMATCH[7]} g=${BASH_REMATCH[8]}
  read -r -a locals <<<"${BASH_REMATCH[10]}"
  [ "$t" -ge "$prev" ] || { fail "uptime went back: $line"; bad=1; }
  prev=$t
  [ "$procs" = 2 ] || { fail "gomaxprocs=$procs: $line"; bad=1; }
  [ "${#locals[@]}" = 2 ] || { fail "want 2 local queues: $line"; bad=1; }
  [ "$idle" -le 2 ] || { fail "idleprocs > 2: $line"; bad=1; }
  [ "$spin" -le 2 ] && [ "$idlem" -le "$thr" ] || { fail "M counts: $line"; bad=1; }
  [ "$thr" -le 8 ] || { fail "threads=$thr for 2 processors: $line"; bad=1; }
  [ "$g" -le 10 ] || { fail "gcount=$g > 10 (main + 9): $line"; bad=1; }
  queued=$((gq + ${locals[0]:-0} + ${locals[1]:-0}))
  [ "$queued" -le "$g" ] || { fail "more queued than alive: $line"; bad=1; }
  [ "$g" -gt "$maxg" ] && maxg=$g
  [ $bad = 1 ] && break
done <"$T/err"
# Periodic: more than one line (how many depends on the machine's load).
[ "$n" -ge 2 ] || fail "only $n schedtrace line(s) at 50 ms over the program's run"
[ "$maxg" = 10 ] || fail "peak gcount $maxg, want 10 (main, syncer, 8 workers)"

# scheddetail: per-P, per-M and per-G lines, the workers by name.
under_goshim 2 GOSHIM_DEBUG=schedtrace=100,scheddetail=1 "$BIN/obs_workers" 4 400 >"$T/out" 2>"$T/err" ||
  fail "obs_workers (scheddetail) exit status $?"
contains "$T/err" '^  P0: status=' "scheddetail P line"
contains "$T/err" '^  M[0-9]+: ' "scheddetail M line"
contains "$T/err" '^  G[0-9]+: status=.*name=worker-[0-3]' "scheddetail G line with its thread name"
done_test
