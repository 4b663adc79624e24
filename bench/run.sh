#!/usr/bin/env bash
# Runs every benchmark natively and under goshim in one run, and prints
# the ratios. The same unmodified binary is used for all modes.
#
#   bench/run.sh BUILD_DIR [bench ...]
#
# Modes: native (all CPUs), native pinned to one CPU (taskset -c 0: the
# native best case for ping-pong benchmarks), goshim at GOSHIM_MAXPROCS=1
# and at the default (all CPUs). Each cell is the median of REPS runs.
set -u
build=${1:?usage: bench/run.sh BUILD_DIR}
shift
only=("$@")
lib=$(cd "$build" && pwd)/libgoshim.so
bin=$build/bench
reps=${REPS:-5}
here=$(cd "$(dirname "$0")" && pwd)

wanted() {
  [ ${#only[@]} -eq 0 ] && return 0
  local c
  for c in "${only[@]}"; do [ "$c" = "$1" ] && return 0; done
  return 1
}

# value MODE BENCH ARGS... -> the median RESULT value over $reps runs
value() {
  local mode=$1 name=$2
  shift 2
  local vals=() v i
  for ((i = 0; i < reps; i++)); do
    case $mode in
      native) v=$(timeout 300 "$bin/$name" "$@" | awk '/^RESULT/{print $2}') ;;
      pinned) v=$(timeout 300 taskset -c 0 "$bin/$name" "$@" | awk '/^RESULT/{print $2}') ;;
      goshim1) v=$(GOSHIM_MAXPROCS=1 LD_PRELOAD=$lib timeout 300 "$bin/$name" "$@" | awk '/^RESULT/{print $2}') ;;
      goshim) v=$(LD_PRELOAD=$lib timeout 300 "$bin/$name" "$@" | awk '/^RESULT/{print $2}') ;;
    esac
    [ -n "$v" ] && vals+=("$v")
  done
  [ ${#vals[@]} -eq 0 ] && { echo "nan"; return; }
  printf '%s\n' "${vals[@]}" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'
}

# row NAME UNIT LOWER_IS_BETTER ARGS...
row() {
  local name=$1 unit=$2 lower=$3
  shift 3
  wanted "$name" || return 0
  local n p g1 g
  n=$(value native "$name" "$@")
  p=$(value pinned "$name" "$@")
  g1=$(value goshim1 "$name" "$@")
  g=$(value goshim "$name" "$@")
  awk -v name="$name $*" -v unit="$unit" -v lower="$lower" -v n="$n" -v p="$p" -v g1="$g1" -v g="$g" '
    function ratio(a, b) { if (a == "nan" || b == "nan" || a == 0 || b == 0) return "  n/a"; return sprintf("%6.1fx", lower ? a / b : b / a) }
    BEGIN {
      best = (lower ? (g1 < g ? g1 : g) : (g1 > g ? g1 : g))
      printf "%-30s %-9s %10s %10s %10s %10s   goshim vs native %s, vs pinned %s\n",
        name, unit, n, p, g1, g, ratio(n, best), ratio(p, best)
    }'
}

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r), $(ldd --version | head -1)"
echo "cells: median of $reps runs; ratios compare goshim's better mode with native"
printf '%-30s %-9s %10s %10s %10s %10s\n' benchmark unit native pinned goshim:1 goshim:N
row create_join us 1 20000 1000
row fairness ratio 0
row file_read MB/s 0 warm 16 16 16
row file_read MB/s 0 cold 16 16 16
row handoff_latency us 1 wait 30
row handoff_latency us 1 read 30
# synchronization (issue 4)
row condvar_pingpong ns 1 50000
row futex_pingpong ns 1 50000
row futex_pingpong ns 1 50000 private
row mutex_contention Mlocks/s 0 4
row mutex_contention Mlocks/s 0 64
row mutex_uncontended ns 1 20000000

# ---- benchmarks with several metrics per run (issue 3) ------------------------------
# mrow NAME "WORD:UNIT:LOWER_IS_BETTER ..." ARGS...
# Runs NAME once per mode and repetition (MREPS, default 3); a program
# prints several "RESULT <value> <unit-words...>" lines, and each spec
# picks the line whose unit words contain WORD. One table row per spec
# (medians).
mrun() {
  local mode=$1 name=$2
  shift 2
  case $mode in
    native) timeout 300 "$bin/$name" "$@" ;;
    pinned) timeout 300 taskset -c 0 "$bin/$name" "$@" ;;
    goshim1) GOSHIM_MAXPROCS=1 LD_PRELOAD=$lib timeout 300 "$bin/$name" "$@" ;;
    goshim) LD_PRELOAD=$lib timeout 300 "$bin/$name" "$@" ;;
  esac 2>/dev/null | grep '^RESULT'
}

mrow() {
  local name=$1 specs=$2
  shift 2
  wanted "$name" || return 0
  local mreps=${MREPS:-3} mode i spec word unit lower
  local tmp
  tmp=$(mktemp -d)
  for mode in native pinned goshim1 goshim; do
    for ((i = 0; i < mreps; i++)); do mrun "$mode" "$name" "$@" >>"$tmp/$mode"; done
  done
  for spec in $specs; do
    IFS=: read -r word unit lower <<<"$spec"
    local n p g1 g
    med() { awk -v w="$word" 'index($0, w) {print $2}' "$tmp/$1" 2>/dev/null | sort -g |
            awk '{a[NR]=$1} END{if (NR) print a[int((NR+1)/2)]; else print "nan"}'; }
    n=$(med native)
    p=$(med pinned)
    g1=$(med goshim1)
    g=$(med goshim)
    awk -v name="$name $* $word" -v unit="$unit" -v lower="$lower" -v n="$n" -v p="$p" -v g1="$g1" -v g="$g" '
      function ratio(a, b) { if (a == "nan" || b == "nan" || a == 0 || b == 0) return "  n/a"; return sprintf("%6.1fx", lower ? a / b : b / a) }
      BEGIN {
        best = (lower ? (g1 < g ? g1 : g) : (g1 > g ? g1 : g))
        printf "%-30s %-9s %10s %10s %10s %10s   goshim vs native %s, vs pinned %s\n",
          name, unit, n, p, g1, g, ratio(n, best), ratio(p, best)
      }'
  done
  rm -rf "$tmp"
}

echo_specs="requests/s:req/s:0 median:us:1 99th:us:1 RSS:MB:1 threads:threads:1"
row pingpong_pipe us 1 200000
mrow echo_server "$echo_specs" 100 2
mrow echo_server "$echo_specs" 1000 2
mrow echo_server "$echo_specs" 5000 2
mrow sleepers "wall:ms:1 RSS:MB:1" 10000 100
