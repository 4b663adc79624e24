#!/usr/bin/env bash
# make demo: an unmodified thread-per-connection server, natively and under
# goshim, at rising connection counts; then 100,000 live threads, past the
# kernel's limit. Prints a table and writes an SVG plot.
#
#   bench/demo/run.sh BUILD_DIR
# Knobs: DEMO_CONNS="100 1000 10000", DEMO_SECONDS=5, DEMO_THREADS=100000
set -u
build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/demo
lib=$build/libgoshim.so
out=$build/demo
conns_list=${DEMO_CONNS:-100 1000 10000}
secs=${DEMO_SECONDS:-5}
nthreads=${DEMO_THREADS:-100000}
ncpu=$(nproc)
mkdir -p "$out"
results=$out/results.tsv
printf 'mode\tconns\trps\tp50_us\tp99_us\trss_kib\tkthreads\n' >"$results"

# status_field PID FIELD : a number from /proc/PID/status
status_field() { awk -v f="$2:" '$1==f{print $2}' "/proc/$1/status" 2>/dev/null; }

# serve MODE CONNS : one load point; appends a row to $results
serve() {
  local mode=$1 conns=$2 pre=()
  [ "$mode" = goshim ] && pre=(env LD_PRELOAD="$lib")
  local srv_out=$out/server.out
  : >"$srv_out"
  "${pre[@]}" "$bin/tpc_server" >"$srv_out" 2>"$out/server.err" &
  local spid=$!
  local i port=""
  for ((i = 0; i < 100; i++)); do
    port=$(awk '/^listening/{print $2}' "$srv_out")
    [ -n "$port" ] && break
    sleep 0.05
  done
  if [ -z "$port" ]; then
    echo "demo: the server did not start ($mode)"; kill -9 $spid 2>/dev/null
    return 1
  fi
  "$bin/loadgen" "$port" "$conns" "$secs" >"$out/load.out" 2>"$out/load.err" &
  local lpid=$! maxk=0 k
  while kill -0 $lpid 2>/dev/null; do
    k=$(status_field $spid Threads)
    [ -n "$k" ] && [ "$k" -gt "$maxk" ] && maxk=$k
    sleep 0.2
  done
  wait $lpid
  local lrc=$?
  local rss
  rss=$(status_field $spid VmHWM)
  kill -9 $spid 2>/dev/null
  wait $spid 2>/dev/null
  local r
  r=$(grep '^RESULT' "$out/load.out")
  if [ $lrc != 0 ] || [ -z "$r" ]; then
    echo "demo: load at $conns connections failed ($mode):"
    sed 's/^/  | /' "$out/load.err" "$out/server.err" | tail -n 5
    printf '%s\t%s\t0\t0\t0\t%s\t%s\n' "$mode" "$conns" "${rss:-0}" "$maxk" >>"$results"
    return 1
  fi
  local rps p50 p99
  rps=$(sed -E 's/.*rps=([0-9]+).*/\1/' <<<"$r")
  p50=$(sed -E 's/.*p50_us=([0-9]+).*/\1/' <<<"$r")
  p99=$(sed -E 's/.*p99_us=([0-9]+).*/\1/' <<<"$r")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$conns" "$rps" "$p50" "$p99" "$rss" "$maxk" >>"$results"
  printf '  %-7s %6s connections: %8s req/s  p99 %6s us  RSS %7s KiB  %5s kernel threads\n' \
    "$mode" "$conns" "$rps" "$p99" "$rss" "$maxk"
}

echo "goshim demo on $(uname -n): $ncpu CPUs, kernel.pid_max=$(cat /proc/sys/kernel/pid_max)," \
  "open files $(ulimit -Hn) per process"
echo
echo "1. thread-per-connection server (bench/demo/tpc_server.c), ${secs}s per point," \
  "load from bench/demo/loadgen.c (epoll, closed loop, 64-byte requests)"
for c in $conns_list; do
  serve native "$c"
  serve goshim "$c"
done

echo
echo "2. thread-per-request past the kernel's thread limit: $nthreads live threads" \
  "(bench/demo/many_threads.c)"
many() {
  local mode=$1 pre=()
  [ "$mode" = goshim ] && pre=(env LD_PRELOAD="$lib")
  /usr/bin/time -f 'maxrss %M' -o "$out/many.$mode.time" \
    timeout -s KILL 120 "${pre[@]}" "$bin/many_threads" "$nthreads" >"$out/many.$mode.out" 2>"$out/many.$mode.err"
  local rc=$?
  local r
  r=$(grep '^RESULT' "$out/many.$mode.out")
  local rss
  rss=$(awk '/^maxrss/{print $2}' "$out/many.$mode.time")
  [ -z "$r" ] && r="RESULT reached=? (status $rc) $(tail -n 1 "$out/many.$mode.err")"
  printf '  %-7s %s peak_rss_kib=%s exit=%d\n' "$mode" "${r#RESULT }" "$rss" $rc
  printf '%s\t%s\t%s\t%s\n' "$mode" "$r" "$rss" "$rc" >"$out/many.$mode.tsv"
}
many native
many goshim

echo
python3 "$here/report.py" "$results" "$out/many.native.tsv" "$out/many.goshim.tsv" "$out/demo.svg"
