#!/usr/bin/env bash
# Runs every benchmark natively, under goshim (default processors and
# GOSHIM_MAXPROCS=1) and its Go counterpart (bench/go/NAME, the same
# workload written idiomatically in Go) in one run, and prints one table
# with the ratios goshim/native and goshim/Go. The same unmodified C binary
# serves native and goshim.
#
#   bench/run.sh BUILD_DIR [bench ...]     (REPS=3: runs per cell)
#
# Each repetition runs the four modes back to back (native, goshim:N,
# goshim:1, Go), so that a change in the machine's load hits every mode;
# a cell is the median of REPS runs. The table is also written to
# BUILD_DIR/bench/results.md (bench/update_results.sh puts it into
# bench/RESULTS.md). Every program bounds its own work; each run is also
# capped at 120 s; the echo server talks to 127.0.0.1 only.
set -u
build=${1:?usage: bench/run.sh BUILD_DIR}
shift
only=("$@")
lib=$(cd "$build" && pwd)/libgoshim.so
bin=$build/bench
gobin=$build/bench/go
reps=${REPS:-3}
out=$build/bench/results.md
modes=(native goshim goshim1 go)

wanted() {
  [ ${#only[@]} -eq 0 ] && return 0
  local c
  for c in "${only[@]}"; do [ "$c" = "$1" ] && return 0; done
  return 1
}

# run MODE NAME GONAME NATIVE_ARGS ARGS -> the program's RESULT lines
run1() {
  local mode=$1 name=$2 goname=$3 nargs=$4 args=$5
  case $mode in
    native) timeout 120 "$bin/$name" $nargs ;;
    goshim) LD_PRELOAD=$lib timeout 120 "$bin/$name" $args ;;
    goshim1) GOSHIM_MAXPROCS=1 LD_PRELOAD=$lib timeout 120 "$bin/$name" $args ;;
    go) [ "$goname" = - ] || timeout 120 "$gobin/$goname" $args ;;
  esac 2>/dev/null | grep '^RESULT'
}

# One value per mode: the median of the RESULT lines containing WORD.
med() {
  awk -v w="$2" 'index($0, w) {print $2}' "$1" 2>/dev/null | sort -g |
    awk '{a[NR]=$1} END{if (NR) print a[int((NR+1)/2)]; else print "-"}'
}

# row [-r REPS] [-n NATIVE_ARGS] NAME GONAME "WORD:UNIT:LOWER_IS_BETTER ..." ARGS...
# Runs NAME (GONAME in Go, - for none) REPS times per mode; one table line
# per spec, picking the RESULT line whose text contains WORD.
row() {
  local nargs=""
  local nset=0
  local reps=$reps
  if [ "$1" = -r ]; then reps=$2; shift 2; fi
  if [ "$1" = -n ]; then nargs=$2; nset=1; shift 2; fi
  local name=$1 goname=$2 specs=$3
  shift 3
  wanted "$name" || return 0
  local args="$*"
  [ $nset = 1 ] || nargs=$args
  local tmp i mode spec word unit lower
  tmp=$(mktemp -d)
  for ((i = 0; i < reps; i++)); do
    for mode in "${modes[@]}"; do run1 "$mode" "$name" "$goname" "$nargs" "$args" >>"$tmp/$mode"; done
  done
  for spec in $specs; do
    IFS=: read -r word unit lower <<<"$spec"
    local label="$name $args"
    [ "$(echo "$specs" | wc -w)" -gt 1 ] && label="$label $word"
    [ $nset = 1 ] && label="$label (native: $nargs)"
    [ "$reps" != "${REPS:-3}" ] && label="$label ($reps runs)"
    [ "$goname" != - ] && [ "$goname" != "$name" ] && label="$label (Go: $goname)"
    awk -v label="$label" -v unit="$unit" -v lower="$lower" \
        -v n="$(med "$tmp/native" "$word")" -v g="$(med "$tmp/goshim" "$word")" \
        -v g1="$(med "$tmp/goshim1" "$word")" -v o="$(med "$tmp/go" "$word")" '
      function ratio(a, b) { if (a == "-" || b == "-" || b + 0 == 0) return "-"; return sprintf("%.2f", a / b) }
      BEGIN {
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label, unit, lower ? "lower" : "higher",
          n, g, g1, o, ratio(g, n), ratio(g, o)
      }' | tee -a "$out"
  done
  rm -rf "$tmp"
}

goversion=$("$(command -v go || echo false)" version 2>/dev/null || echo "go: not installed")
{
  echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), Linux $(uname -r), $(ldd --version | head -1 | sed 's/^ldd //'), $goversion"
  echo "- command: bench/run.sh $build${only[*]:+ ${only[*]}}  (REPS=$reps), started $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- cells: median of $reps runs; the four modes run back to back in each repetition"
  echo "- modes: native; goshim:N = LD_PRELOAD at the default configuration (no GOSHIM_* variable); goshim:1 = GOSHIM_MAXPROCS=1; Go = bench/go/NAME"
  echo "- ratios: goshim:N / native and goshim:N / Go (below 1 is better for 'lower' rows, above 1 for 'higher' rows)"
  echo
  echo "| benchmark | unit | better | native | goshim:N | goshim:1 | Go | goshim/native | goshim/Go |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
} | tee "$out"

# thread lifecycle
row create_join create_join "create+join:us:1" 20000 1000
row create_join create_join "create+join:us:1" 20000 1
# synchronization
row condvar_pingpong condvar_pingpong "round:ns:1" 50000
row futex_pingpong chan_pingpong "round:ns:1" 50000
row pingpong_pipe pingpong_pipe "round:us:1" 50000
row mutex_contention mutex_contention "locks/s:Mlocks/s:0" 4
row mutex_contention mutex_contention "locks/s:Mlocks/s:0" 16
row mutex_uncontended mutex_uncontended "ns:ns:1" 20000000
# scheduling
row fairness fairness "min/max:ratio:0"
row handoff_latency - "us:us:1" wait 30
row file_read - "MB/s:MB/s:0" warm 16 16 16
# timers and memory
row sleepers sleepers "create:ms:1 wall:ms:1 RSS:MB:1" 10000 100 2
row -n 10000 idle_threads idle_threads "resident:bytes:1" 100000
# the thread-per-connection echo server (client: bench/echo_client.c)
echo_specs="requests/s:req/s:0 median:us:1 99th:us:1 RSS:MB:1 threads:threads:1"
row echo_server echo_server "$echo_specs" 100 2
row echo_server echo_server "$echo_specs" 1000 2
row echo_server echo_server "$echo_specs" 5000 2
# 19,000 connections: natively 19,000 threads are created under the accept
# loop; one run per mode keeps make bench within about 15 minutes.
row -r 1 echo_server echo_server "$echo_specs" 19000 2
{ echo; echo "finished $(date -u '+%H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"; } | tee -a "$out"
