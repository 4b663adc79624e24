#!/usr/bin/env bash
# make bench-db: MariaDB (one thread per connection) natively and under
# goshim at the default configuration, driven by sysbench oltp_read_write
# (issue 16).
#
#   bench/db.sh BUILD_DIR
#
# A private datadir under BUILD_DIR/bench-db (tables prepared once: 4 x
# 100,000 rows; delete the directory to prepare again), a server of its own
# on a unix socket there (--skip-networking: no TCP port, never the
# system's service), restarted for every point; at each connection count
# the native and the goshim server run one after the other (alternating,
# DB_ROUNDS times). Every server it started is shut down on exit, also
# when interrupted. Environment: DB_CONNS ("16 256 1000 3000"),
# DB_SECONDS (20 per point), DB_ROUNDS (1), DB_LIB (the library),
# DB_IDLE (10: seconds the server idles after the load before its idle
# RSS is read; 0: not read). For experiments: DB_MODES ("native goshim"),
# DB_ENV_NATIVE / DB_ENV_GOSHIM (VAR=VALUE words for one side's server;
# e.g. DB_ENV_GOSHIM=MALLOC_CONF=stats_interval:4000000000,stats_interval_opts:a
# makes jemalloc print its statistics into error-goshim.log as the server
# runs), DB_SMAPS=1 (keep the server's whole smaps at the steady point),
# DB_SB_OPTS (more sysbench run options, e.g. --db-ps-mode=disable: no
# server-side prepared statements, ~18 per connection otherwise).
#
# Per point: transactions/s, p95 and p99 latency (from sysbench's
# histogram), errors (sysbench's ignored errors + reconnects), the
# server's peak kernel threads (/proc/PID/status Threads, sampled every
# 0.5 s), peak RSS (VmHWM), steady RSS (smaps_rollup's Rss DB_SECONDS/2
# after sysbench's "Threads started!": every connection open) and idle
# RSS (VmRSS DB_IDLE s after sysbench ended: every connection closed).
set -u
build=${1:?usage: bench/db.sh BUILD_DIR}
build=$(cd "$build" && pwd)
lib=${DB_LIB:-$build/libgoshim.so}  # DB_LIB: another build of the library (an A/B run)
dir=$build/bench-db
data=$dir/data
sock=$dir/sock
CONNS=${DB_CONNS:-16 256 1000 3000}
SECS=${DB_SECONDS:-20}
ROUNDS=${DB_ROUNDS:-1}
TABLES=4 ROWS=100000

for t in mariadbd mariadb-install-db mariadb-admin mariadb sysbench; do
  command -v $t >/dev/null || { echo "bench-db: $t is missing (make deps)" >&2; exit 1; }
done
[ -f "$lib" ] || { echo "bench-db: $lib is missing (make)" >&2; exit 1; }

# Nothing of the caller's goshim configuration leaks into a run.
unset LD_PRELOAD
for v in $(compgen -e); do case $v in GOSHIM_*) unset "$v" ;; esac; done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# Beyond the issue's options: sysbench opens all its connections at once
# (3,000 connect() calls: the listen backlog must hold them) and prepares
# ~18 statements on each.
OPTS=(--no-defaults --user=root --skip-networking --skip-name-resolve
      --thread-handling=one-thread-per-connection --max-connections=5000
      --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=2
      --back-log=4096 --max-prepared-stmt-count=1048576 --open-files-limit=20000 --table-open-cache=400)

server_pid=""
stop_server() {
  [ -n "$server_pid" ] || return 0
  if kill -0 "$server_pid" 2>/dev/null; then
    timeout 60 mariadb-admin --socket="$sock" shutdown >/dev/null 2>&1
    local i
    for i in $(seq 600); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null
  fi
  wait "$server_pid" 2>/dev/null
  server_pid=""
}
sampler_pid=""
cleanup() {
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
  [ -n "${sb_pid:-}" ] && kill -KILL "$sb_pid" 2>/dev/null
  stop_server
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start_server MODE: native or goshim (LD_PRELOAD, default configuration).
start_server() {
  local mode=$1 env=()
  [ "$mode" = goshim ] && env=(LD_PRELOAD="$lib")
  # DB_ENV_NATIVE / DB_ENV_GOSHIM: extra VAR=VALUE words for one side's
  # server (an experiment, e.g. MALLOC_CONF=...); empty in `make bench-db`.
  if [ "$mode" = goshim ]; then env+=(${DB_ENV_GOSHIM:-}); else env+=(${DB_ENV_NATIVE:-}); fi
  rm -f "$sock"
  env "${env[@]}" mariadbd "${OPTS[@]}" --datadir="$data" --socket="$sock" \
    --pid-file="$dir/pid" --log-error="$dir/error-$mode.log" </dev/null >/dev/null 2>&1 &
  server_pid=$!
  local i
  for i in $(seq 1200); do
    mariadb-admin --socket="$sock" ping >/dev/null 2>&1 && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench-db: the $mode server did not start: $(tail -n 3 "$dir/error-$mode.log")" >&2
  exit 1
}

SB=(sysbench oltp_read_write --db-driver=mysql --mysql-socket="$sock" --mysql-user=root
    --mysql-db=sbtest --tables=$TABLES --table-size=$ROWS)

mkdir -p "$dir"
if [ ! -f "$data/.prepared" ]; then
  rm -rf "$data"
  mariadb-install-db "${OPTS[@]}" --datadir="$data" --auth-root-authentication-method=socket \
    --skip-test-db >"$dir/install.log" 2>&1 || { echo "bench-db: mariadb-install-db failed" >&2; exit 1; }
  start_server native
  mariadb --socket="$sock" -e "CREATE DATABASE sbtest" || exit 1
  echo "preparing $TABLES tables of $ROWS rows..."
  "${SB[@]}" --threads=4 prepare >"$dir/prepare.log" 2>&1 || { echo "bench-db: prepare failed" >&2; exit 1; }
  stop_server
  touch "$data/.prepared"
fi

# sample PID OUT: peak Threads of PID every 0.5 s into OUT until killed.
sample() {
  local pid=$1 out=$2 peak=0 n
  while :; do
    n=$(awk '/^Threads:/{print $2}' "/proc/$pid/status" 2>/dev/null) || break
    [ -n "$n" ] || break
    [ "$n" -gt "$peak" ] && { peak=$n; echo "$peak" >"$out"; }
    sleep 0.5
  done
}

# point MODE CONNS ROUND: one measurement; appends a line to $dir/results.
point() {
  local mode=$1 c=$2 r=$3
  local out=$dir/sb-$mode-$c-$r.txt
  start_server "$mode"
  echo 0 >"$dir/threads"
  sample "$server_pid" "$dir/threads" &
  sampler_pid=$!
  "${SB[@]}" ${DB_SB_OPTS:-} --threads="$c" --time="$SECS" --report-interval=0 \
    --histogram=on --percentile=95 --rand-type=uniform run >"$out" 2>&1 &
  sb_pid=$!
  # The steady state: a snapshot of the server's memory near the end of the
  # run, every connection open (smaps_rollup, status, and with DB_SMAPS=1
  # the whole smaps for a per-mapping look).
  local snap=$dir/snap-$mode-$c-$r
  rm -f "$snap".*
  ( for i in $(seq 600); do grep -q "Threads started" "$out" 2>/dev/null && break; sleep 0.5; done
    sleep $((SECS / 2))
    cat "/proc/$server_pid/smaps_rollup" >"$snap.rollup" 2>/dev/null
    cat "/proc/$server_pid/status" >"$snap.status" 2>/dev/null
    [ "${DB_SMAPS:-0}" = 1 ] && cat "/proc/$server_pid/smaps" >"$snap.smaps" 2>/dev/null ) &
  local snap_pid=$!
  wait "$sb_pid"
  local st=$?
  sb_pid=""
  local hwm
  hwm=$(awk '/^VmHWM:/{print $2}' "/proc/$server_pid/status" 2>/dev/null)
  # The idle server after the load (every connection closed): its RSS
  # DB_IDLE seconds later (10 by default; 0: not measured).
  local idle=0
  if [ "${DB_IDLE:-10}" -gt 0 ]; then
    sleep "${DB_IDLE:-10}"
    idle=$(awk '/^VmRSS:/{print $2}' "/proc/$server_pid/status" 2>/dev/null)
  fi
  kill "$sampler_pid" 2>/dev/null
  wait "$sampler_pid" 2>/dev/null
  kill "$snap_pid" 2>/dev/null
  wait "$snap_pid" 2>/dev/null
  local rss
  rss=$(awk '/^Rss:/{print $2}' "$snap.rollup" 2>/dev/null)
  sampler_pid=""
  stop_server
  # p95/p99 from the histogram (value  *** count lines).
  awk -v mode="$mode" -v c="$c" -v st="$st" -v thr="$(cat "$dir/threads")" -v hwm="${hwm:-0}" -v rss="${rss:-0}" -v idle="${idle:-0}" '
    /transactions:/ { gsub(/[()]/, "", $3); tps = $3 }
    /ignored errors:/ { err += $3 }
    /reconnects:/ { err += $2 }
    /^ *[0-9.]+ *\|[*]* *[0-9]+$/ { split($0, a, "|"); v = a[1] + 0; n = $NF + 0;
                                   hv[++nh] = v; hc[nh] = n; tot += n }
    END {
      p95 = p99 = 0; s = 0
      for (i = 1; i <= nh; i++) { s += hc[i];
        if (!p95 && s >= 0.95 * tot) p95 = hv[i];
        if (!p99 && s >= 0.99 * tot) p99 = hv[i] }
      if (st != 0 || tps == "") tps = "failed"
      printf "%s %s %s %s %s %d %d %d %d %d\n", mode, c, tps, p95, p99, err, thr, hwm / 1024, rss / 1024, idle / 1024
    }' "$out" >>"$dir/results"
  tail -n 1 "$dir/results"
}

: >"$dir/results"
echo "mariadbd $(mariadbd --version | awk '{print $3}'), sysbench $(sysbench --version | awk '{print $2}'), $(nproc) CPUs; $SECS s per point"
MODES=${DB_MODES:-native goshim}  # DB_MODES=goshim: one side only (an experiment)
for c in $CONNS; do
  for r in $(seq "$ROUNDS"); do
    for m in $MODES; do point "$m" "$c" "$r"; done
  done
done

# The table: medians would need more rounds; the best of the rounds is shown.
echo
echo "| connections | tps native | tps goshim | ratio | p95 ms native / goshim | p99 ms native / goshim | errors native / goshim | kernel threads native / goshim | peak RSS MiB native / goshim | RSS ratio | steady RSS MiB native / goshim | idle RSS MiB native / goshim |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in $CONNS; do
  awk -v c="$c" '
    $2 == c && $3 != "failed" { m = $1
      if (!(m in tps) || $3 + 0 > tps[m]) { tps[m] = $3; p95[m] = $4; p99[m] = $5; err[m] = $6; thr[m] = $7; rss[m] = $8; st[m] = $9; idl[m] = $10 } }
    $2 == c && $3 == "failed" && !($1 in tps) { failed[$1] = 1 }
    END {
      n = "native"; g = "goshim"
      if (!(n in tps) || !(g in tps)) { printf "| %s | %s | %s | - | - | - | - | - | - | - | - | - |\n", c, (n in tps) ? tps[n] : "failed", (g in tps) ? tps[g] : "failed"; exit }
      printf "| %s | %.0f | %.0f | %.2fx | %.1f / %.1f | %.1f / %.1f | %d / %d | %d / %d | %d / %d | %.2fx | %d / %d | %d / %d |\n",
        c, tps[n], tps[g], tps[g] / tps[n], p95[n], p95[g], p99[n], p99[g], err[n], err[g],
        thr[n], thr[g], rss[n], rss[g], rss[g] / rss[n], st[n], st[g], idl[n], idl[g]
    }' "$dir/results"
done
