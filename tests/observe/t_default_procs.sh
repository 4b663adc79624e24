#!/usr/bin/env bash
# The default processor count (no GOSHIM_MAXPROCS): the CPUs in the
# affinity mask (the cgroup quota cap is unit-tested with fake cgroup trees
# in tests/unit/config_test.cpp). Seen through schedtrace's gomaxprocs and
# the message for a bad GOSHIM_MAXPROCS.
. "$(dirname "$0")/lib.sh"

ncpu=$(nproc)  # the affinity mask of this shell
# cgroup quota of this machine, if any, caps the default: compute it the
# simple way for v2 and v1 so the expectation is independent of goshim.
cap=0
if [ -r /sys/fs/cgroup/cpu.max ] && read -r q p </sys/fs/cgroup/cpu.max && [ "$q" != max ]; then
  cap=$(((q + p - 1) / p))
elif q=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null) && [ "$q" -gt 0 ]; then
  p=$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)
  cap=$(((q + p - 1) / p))
fi
want=$ncpu
[ "$cap" -gt 0 ] && [ "$cap" -lt "$want" ] && want=$cap

env -u GOSHIM_MAXPROCS LD_PRELOAD="$LIB" GOSHIM_DEBUG=schedtrace=20 "$BIN/obs_workers" 2 200 \
  >"$T/out" 2>"$T/err" || fail "obs_workers exit status $?"
contains "$T/out" '^done 2$' "program result"
contains "$T/err" "^SCHED .* gomaxprocs=$want " "default gomaxprocs=$want"
lacks "$T/err" "gomaxprocs=([0-9]*[^$want ]|$want[0-9])" "any other gomaxprocs"

env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS=abc true 2>"$T/err2" || fail "true under goshim"
contains "$T/err2" "GOSHIM_MAXPROCS=abc is not a number in 1\.\.[0-9]+; using $want\$" "bad value falls back to $want"

# One CPU in the mask: one processor.
if command -v taskset >/dev/null; then
  first=$(taskset -pc $$ | sed 's/.*: //; s/[-,].*//')
  taskset -c "$first" env -u GOSHIM_MAXPROCS LD_PRELOAD="$LIB" GOSHIM_DEBUG=schedtrace=20 \
    "$BIN/obs_workers" 2 200 >"$T/out" 2>"$T/err" || fail "pinned obs_workers exit status $?"
  contains "$T/err" '^SCHED .* gomaxprocs=1 ' "one CPU in the mask gives gomaxprocs=1"
  lacks "$T/err" 'gomaxprocs=([02-9]|1[0-9])' "pinned: any other gomaxprocs"
else
  fail "taskset (util-linux) is missing"
fi
done_test
