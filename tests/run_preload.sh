#!/usr/bin/env bash
# Runs the integration tests: ordinary programs (tests/preload/*.c, *.cpp)
# built without goshim, each run natively and under LD_PRELOAD=libgoshim.so
# at GOSHIM_MAXPROCS=1, at 2, and at the default configuration (no GOSHIM_*
# variable at all: what a user gets), with a timeout. No GOSHIM_* variable
# of the caller's environment reaches a run.
#
#   tests/run_preload.sh BUILD_DIR [case ...]
#
# Cases and their expectations are listed in tests/preload/cases.txt:
#   name  timeout_s  expect  native  [args...]
#     expect  exit:N (exit status N) or signal:N (killed by signal N)
#     native  same  run natively too; stdout must be identical, and stderr
#                   empty when it is empty natively
#             run   run natively too; must pass, stdout may differ
#             run:VAR=VAL[,VAR=VAL...]  run natively with these variables
#                   (a smaller load the kernel can carry); must pass, stdout
#                   may differ
#             skip  goshim only (native cannot at all)
# Under goshim the runner also sets MAX_KERNEL_THREADS=procs+4, which the
# programs check while their threads are alive (common.h).
# A program that cannot test what it claims here (not root, no pty, ...)
# prints why on stderr and exits 77: the run counts as SKIP, never as a
# pass. A goshim run that exits 77 after the native run of the same case
# passed is a FAIL: the system allows the test, goshim refused it.
#
# The expected mode comes first from tests/goshim_mode.sh: M:N, or 1:1 when
# goshim refuses M:N on this system (glibc older than 2.34) and says so in
# one line. Every goshim run is checked against it: under M:N a run that
# printed the refusal line fails; under 1:1 a run that did not print it
# fails. Under 1:1 the M:N claims are not made (no MAX_KERNEL_THREADS, no
# REQUIRE_MIGRATION), and the goshim-only cases (native: skip, e.g. 100,000
# live threads) are reported as SKIP with the refusal as the reason.
#
# Cross builds (make ARCH=aarch64 test) set TEST_EMU to the emulator
# command; tests/preload/cases_emu.txt then says which cases (or which
# native runs) emulation cannot carry, and why:
#   name  skip          reason     the case is SKIP in every mode
#   name  native=skip   reason     goshim runs only (SKIP for native)
#   name  native=run:VAR=VAL  reason   a smaller native load
#   name  goshim=skip   reason     native run only (SKIP for p1, p2, pd, o1)
#   name  o1=skip       reason     no GOSHIM_MODE=1:1 run (one kernel thread
#                                  per thread, as natively)
#   name  goshim=run:VAR=VAL  reason   a smaller load for the goshim runs
# Native and goshim runs both go through the emulator, goshim's as
# QEMU_SET_ENV=LD_PRELOAD=... (an LD_PRELOAD of the emulator's own
# environment would reach the host's loader), both with TEST_EMU_PRELOAD
# (tests/emu/execwrap.so: a program that execs a program of the target
# runs it under the emulator again, EMU_EXEC); TEST_TIMEOUT_SCALE
# multiplies every timeout. TEST_TRUE names a trivial program of the
# target for goshim_mode.sh.
set -u
build=${1:?usage: run_preload.sh BUILD_DIR [case ...]}
emu=(${TEST_EMU:-})
native_pre=()
tscale=${TEST_TIMEOUT_SCALE:-1}
# Kernel threads the emulator adds to every process (qemu-user's RCU
# thread): added to MAX_KERNEL_THREADS, which counts /proc/self/status.
emu_threads=${TEST_EMU_THREADS:-0}
shift
only=("$@")
here=$(cd "$(dirname "$0")" && pwd)
lib=$(cd "$build" && pwd)/libgoshim.so
bindir=$build/tests/preload
out=$(mktemp -d /tmp/goshim-preload.XXXXXX)
trap 'rm -rf "$out"' EXIT

pass=0
fail=0
skip=0
failed=()
skipped=()

# Every GOSHIM_* variable of the caller's environment is dropped.
unset_goshim=()
for v in $(compgen -e | grep '^GOSHIM_'); do unset_goshim+=(-u "$v"); done

# The processors goshim uses by default: the affinity mask capped by the
# cgroup CPU quota (computed here independently of goshim).
default_procs() {
  local n q p cap=0
  n=$(nproc)
  if [ -r /sys/fs/cgroup/cpu.max ] && read -r q p </sys/fs/cgroup/cpu.max && [ "$q" != max ]; then
    cap=$(((q + p - 1) / p))
  elif q=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null) && [ "$q" -gt 0 ]; then
    p=$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)
    cap=$(((q + p - 1) / p))
  fi
  [ "$cap" -gt 0 ] && [ "$cap" -lt "$n" ] && n=$cap
  echo "$n"
}
dprocs=$(default_procs)

# How the program under test gets goshim.
if [ ${#emu[@]} -gt 0 ]; then
  wrap=${TEST_EMU_PRELOAD:-}
  export EMU_EXEC="${emu[*]}"
  preload=(QEMU_SET_ENV="LD_PRELOAD=$lib${wrap:+:$wrap}")
  [ -n "$wrap" ] && native_pre=(QEMU_SET_ENV="LD_PRELOAD=$wrap")
  echo "emulated: ${emu[*]} ($(${emu[0]} --version | head -n 1)), timeouts x$tscale"
else
  preload=(LD_PRELOAD="$lib")
fi

mode_line=$("$here/goshim_mode.sh" "$lib") || exit 2
echo "goshim mode: $mode_line"
refusal='^goshim: warning: .*; running every thread as a kernel thread \(no M:N\)$'
mn=1
[ "${mode_line%% *}" = 1:1 ] && mn=0

wanted() {
  [ ${#only[@]} -eq 0 ] && return 0
  local c
  for c in "${only[@]}"; do [ "$c" = "$1" ] && return 0; done
  return 1
}

# timeout runs natively, outside the preloaded environment: under goshim
# a hang of goshim itself in timeout (its start-up) left the run waiting
# for ever instead of failing this case.
# run_one NAME MODE TIMEOUT EXPECT ARGS... ; MODE is native, p1, p2,
# pd (the default configuration) or o1 (GOSHIM_MODE=1:1). Returns 0 on pass, 1 on fail, 2 on skip.
run_one() {
  local name=$1 mode=$2 tmo=$3 expect=$4
  shift 4
  local bin=$bindir/$name
  local so=$out/$name.$mode.out se=$out/$name.$mode.err
  local t0 t1 rc
  t0=$(date +%s.%N)
  case $mode in
    native)
      (env "${unset_goshim[@]}" "${native_pre[@]}" "${native_env[@]}" timeout -s KILL "$tmo" "${emu[@]}" "$bin" "$@" >"$so" 2>"$se" </dev/null
       exit $?) 2>/dev/null
      rc=$? ;;
    pd)
      local extra=()
      [ $mn = 1 ] && extra=(MAX_KERNEL_THREADS=$((dprocs + 4 + emu_threads)))
      [ $mn = 1 ] && [ "$dprocs" -ge 2 ] && extra+=(REQUIRE_MIGRATION=1)
      [ $mn = 0 ] && extra+=("${native_env[@]}")  # 1:1: kernel threads, the native load
      extra+=("${goshim_env[@]}")
      (timeout -s KILL "$tmo" env "${unset_goshim[@]}" "${preload[@]}" \
        "${extra[@]}" "${emu[@]}" "$bin" "$@" >"$so" 2>"$se" </dev/null; exit $?) 2>/dev/null
      rc=$? ;;
    o1)
      # GOSHIM_MODE=1:1, asked for (no refusal line): the pass-through mode
      # that a refusal gives, checked on a system where M:N works.
      (timeout -s KILL "$tmo" env "${unset_goshim[@]}" "${preload[@]}" GOSHIM_MODE=1:1 "${native_env[@]}" \
        "${goshim_env[@]}" "${emu[@]}" "$bin" "$@" >"$so" 2>"$se" </dev/null; exit $?) 2>/dev/null
      rc=$? ;;
    p*)
      local procs=${mode#p}
      local extra=()
      [ $mn = 1 ] && extra=(MAX_KERNEL_THREADS=$((procs + 4 + emu_threads)))
      [ $mn = 1 ] && [ "$procs" -ge 2 ] && extra+=(REQUIRE_MIGRATION=1)
      [ $mn = 0 ] && extra+=("${native_env[@]}")  # 1:1: kernel threads, the native load
      extra+=("${goshim_env[@]}")
      (timeout -s KILL "$tmo" env "${unset_goshim[@]}" "${preload[@]}" GOSHIM_MAXPROCS="$procs" \
        "${extra[@]}" "${emu[@]}" "$bin" "$@" >"$so" 2>"$se" </dev/null; exit $?) 2>/dev/null
      rc=$? ;;
  esac
  t1=$(date +%s.%N)
  local dt
  dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2fs", b-a}')
  local ok=0 why=""
  if [ "$rc" = 77 ] && [ "$expect" != exit:77 ] && [ "$mode" != native ] && [ "$native_ok" = 1 ]; then
    # The native run tested the claim on this system: "cannot test" under
    # goshim is goshim refusing what the system allows, not a skip.
    printf 'FAIL %-28s %-6s %s: exited 77 (cannot test) under goshim; the native run tested it\n' "$name" "$mode" "$dt"
    sed 's/^/    | /' "$se" | tail -n 15
    fail=$((fail + 1))
    failed+=("$name/$mode(skip)")
    return 1
  fi
  if [ "$rc" = 77 ] && [ "$expect" != exit:77 ]; then
    printf 'SKIP %-28s %-6s %s: %s\n' "$name" "$mode" "$dt" "$(tail -n 1 "$se")"
    skip=$((skip + 1))
    skipped+=("$name/$mode")
    return 2
  fi
  case $expect in
    exit:*)
      [ "$rc" = "${expect#exit:}" ] && ok=1 || why="exit status $rc, expected ${expect#exit:}" ;;
    signal:*)
      [ "$rc" = $((128 + ${expect#signal:})) ] && ok=1 || why="status $rc, expected death by signal ${expect#signal:}" ;;
  esac
  [ "$rc" = 137 ] && [ "$expect" != "signal:9" ] && why="timed out after ${tmo}s (or killed)"
  if [ "$mode" != native ]; then
    if [ $mn = 1 ] && grep -Eq "$refusal" "$se"; then
      ok=0; why="goshim fell back to 1:1 ($(grep -E "$refusal" "$se" | head -n 1))"
    elif [ $mn = 0 ] && ! grep -Eq "$refusal" "$se"; then
      ok=0; why="goshim did not print its refusal of M:N (expected mode: $mode_line)"
    elif [ $mn = 0 ]; then
      # The refusal is the expected output of every goshim process here (a
      # program's children too); the rest of stderr is compared as usual.
      grep -Ev "$refusal" "$se" >"$se.rest"
      mv "$se.rest" "$se"
    fi
  fi
  if [ $ok = 1 ]; then
    printf 'PASS %-28s %-6s %s\n' "$name" "$mode" "$dt"
    pass=$((pass + 1))
    return 0
  fi
  printf 'FAIL %-28s %-6s %s: %s\n' "$name" "$mode" "$dt" "$why"
  sed 's/^/    | /' "$se" | tail -n 15
  fail=$((fail + 1))
  failed+=("$name/$mode")
  return 1
}

while read -r name tmo expect native args; do
  case $name in ''|'#'*) continue ;; esac
  wanted "$name" || continue
  emu_native=
  emu_goshim=
  emu_o1=
  goshim_env=()
  emu_skip_all=
  if [ ${#emu[@]} -gt 0 ]; then
    # A case may have several rules (one per line).
    while read -r emu_action emu_why; do
      case $emu_action in
        skip)
          for mode in native p1 p2 pd; do
            printf 'SKIP %-28s %-6s emulated: %s\n' "$name" "$mode" "$emu_why"
            skip=$((skip + 1)); skipped+=("$name/$mode")
          done
          emu_skip_all=1 ;;
        native=skip)
          printf 'SKIP %-28s %-6s emulated: %s\n' "$name" native "$emu_why"
          skip=$((skip + 1)); skipped+=("$name/native")
          emu_native=skip ;;
        native=run:*)
          emu_native=${emu_action#native=} ;;
        goshim=skip)
          emu_goshim=skip; goshim_why=$emu_why ;;
        o1=skip)
          emu_o1=skip; o1_why=$emu_why ;;
        goshim=run:*)
          IFS=, read -r -a goshim_env <<<"${emu_action#goshim=run:}" ;;
      esac
    done < <(awk -v n="$name" '$1 == n {$1 = ""; print}' "$here/preload/cases_emu.txt")
    [ -n "$emu_skip_all" ] && continue
  fi
  if [ ! -x "$bindir/$name" ]; then
    printf 'FAIL %-28s %-6s not built\n' "$name" "-"
    fail=$((fail + 1)); failed+=("$name/build")
    continue
  fi
  if [ -x "$here/preload/$name.check.sh" ] && ! "$here/preload/$name.check.sh" "$bindir/$name"; then
    # A program that cannot test its claim on this system at all (exit 77
    # natively, e.g. a toolchain without the feature) is skipped, not a
    # failed check.
    # shellcheck disable=SC2086
    (env "${unset_goshim[@]}" timeout -s KILL "$tmo" "$bindir/$name" $args \
       >/dev/null 2>"$out/$name.check.err" </dev/null; exit $?) 2>/dev/null
    if [ $? = 77 ]; then
      for mode in native p1 p2 pd; do
        printf 'SKIP %-28s %-6s %s\n' "$name" "$mode" "$(tail -n 1 "$out/$name.check.err")"
        skip=$((skip + 1)); skipped+=("$name/$mode")
      done
      continue
    fi
    printf 'FAIL %-28s %-6s %s\n' "$name" "check" "$name.check.sh"
    fail=$((fail + 1)); failed+=("$name/check")
    continue
  fi
  tmo=$((tmo * tscale))
  # shellcheck disable=SC2086
  set -- $args
  if [ "$native" = skip ] && [ $mn = 0 ]; then
    for mode in p1 p2 pd; do
      printf 'SKIP %-28s %-6s needs M:N; goshim refused it: %s\n' "$name" "$mode" "${mode_line#1:1 }"
      skip=$((skip + 1)); skipped+=("$name/$mode")
    done
    continue
  fi
  [ -n "$emu_native" ] && native=$emu_native
  native_ok=0
  native_env=()
  case $native in run:*) IFS=, read -r -a native_env <<<"${native#run:}" ;; esac
  if [ "$native" != skip ]; then
    run_one "$name" native "$tmo" "$expect" "$@" && native_ok=1
  fi
  modes="p1 p2 pd"
  # Cases listed in cases_1to1.txt also run in 1:1 mode (o1) where goshim
  # runs M:N (where it refuses M:N, p1, p2 and pd are 1:1 already).
  [ $mn = 1 ] && grep -qx "$name" <(sed 's/#.*//; s/[[:space:]]//g' "$here/preload/cases_1to1.txt") &&
    modes+=" o1"
  for mode in $modes; do
    if [ "$emu_goshim" = skip ]; then
      printf 'SKIP %-28s %-6s emulated: %s\n' "$name" "$mode" "$goshim_why"
      skip=$((skip + 1)); skipped+=("$name/$mode")
      continue
    fi
    if [ "$mode" = o1 ] && [ "$emu_o1" = skip ]; then
      printf 'SKIP %-28s %-6s emulated: %s\n' "$name" "$mode" "$o1_why"
      skip=$((skip + 1)); skipped+=("$name/$mode")
      continue
    fi
    # Output is compared only with a native run that passed (a skipped or
    # failed native run is reported as such already).
    if run_one "$name" "$mode" "$tmo" "$expect" "$@" && [ "$native" = same ] && [ $native_ok = 1 ]; then
      if ! cmp -s "$out/$name.native.out" "$out/$name.$mode.out"; then
        printf 'FAIL %-28s %-6s output differs from native:\n' "$name" "$mode"
        diff "$out/$name.native.out" "$out/$name.$mode.out" | head -n 10 | sed 's/^/    | /'
        fail=$((fail + 1)); pass=$((pass - 1))
        failed+=("$name/$mode(output)")
      elif [ ! -s "$out/$name.native.err" ] && [ -s "$out/$name.$mode.err" ]; then
        # A program that writes nothing to stderr natively must not get
        # anything there from goshim (stderr that a test writes itself is
        # informational: kernel-thread counts, timings).
        printf 'FAIL %-28s %-6s stderr is empty natively, not here:\n' "$name" "$mode"
        head -n 10 "$out/$name.$mode.err" | sed 's/^/    | /'
        fail=$((fail + 1)); pass=$((pass - 1))
        failed+=("$name/$mode(stderr)")
      fi
    fi
  done
done <"$here/preload/cases.txt"

echo "preload tests: $pass passed, $fail failed, $skip skipped (goshim mode: ${mode_line%% *})"
[ $skip -ne 0 ] && printf '  skipped: %s\n' "${skipped[@]}"
if [ $fail -ne 0 ]; then
  printf '  failed: %s\n' "${failed[@]}"
  exit 1
fi
