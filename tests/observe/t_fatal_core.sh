#!/usr/bin/env bash
# A goshim fatal error ends the process as a crash: SIGABRT's default
# action, a core dump where RLIMIT_CORE allows, and no handler of the
# program's (the runtime that would route one is what failed). Before,
# goshim's own SIGABRT handler took the abort: the program's handler ran
# and the process exited with status 134, no core. The error is provoked
# by obs_fatal (a fork at the end of the address space). At 1 and 2
# processors and at the default configuration. SKIP (77) where the kernel
# writes no core into the working directory.
. "$(dirname "$0")/lib.sh"

pat=$(cat /proc/sys/kernel/core_pattern 2>/dev/null)
case "$pat" in
  "" | "|"* | /*) echo "SKIP: core_pattern '$pat' does not write a core into the working directory"; exit 77 ;;
esac
[ "$(ulimit -H -c)" = 0 ] && { echo "SKIP: the hard RLIMIT_CORE is 0"; exit 77; }

# Natively the grandchild runs.
mkdir -p "$T/native" && (cd "$T/native" && "$BIN/obs_fatal") >"$T/out" 2>"$T/err"
contains "$T/out" '^grandchild ran$' "natively"
contains "$T/out" '^grandchild: exit 0$' "natively"

for procs in 1 2 default; do
  d="$T/p$procs"
  mkdir -p "$d"
  if [ $procs = default ]; then
    (cd "$d" && timeout -s KILL 60 env LD_PRELOAD="$LIB" "$BIN/obs_fatal") >"$T/out" 2>"$T/err"
  else
    (cd "$d" && timeout -s KILL 60 env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=$procs "$BIN/obs_fatal") >"$T/out" 2>"$T/err"
  fi
  rc=$?
  [ $rc = 0 ] || fail "p$procs: exit status $rc"
  contains "$T/err" '^goshim: fatal error: ' "p$procs: the fatal error's message"
  contains "$T/out" '^grandchild: signal 6 core 1$' "p$procs: ended by SIGABRT with a core dump"
  lacks "$T/err" 'handler ran' "p$procs: the program's SIGABRT handler"
  ls "$d" | grep -Eq '^core' || fail "p$procs: no core file in the working directory"
  rm -f "$d"/core*
done
done_test
