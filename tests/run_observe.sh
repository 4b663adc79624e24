#!/usr/bin/env bash
# Runs the observability and launcher tests: tests/observe/t_*.sh, each a
# script that runs ordinary programs (tests/observe/obs_*.c, built without
# goshim) under the library or the launcher and checks what goshim prints.
#
#   tests/run_observe.sh BUILD_DIR [test ...]
#
# Every test checks what goshim prints or does in M:N mode (dumps,
# schedtrace, the deadlock report, the launcher's --compare, an installed
# goshim running M:N). When goshim refuses M:N on this system
# (tests/goshim_mode.sh says 1:1, e.g. glibc older than 2.34), each test is
# reported as SKIP with the refusal as the reason, never as a pass.
set -u
build=${1:?usage: run_observe.sh BUILD_DIR [test ...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$build" && pwd)
export LIB=$BUILD/libgoshim.so BIN=$BUILD/tests/observe LAUNCHER=$BUILD/goshim BUILD
mode_line=$("$here/goshim_mode.sh" "$LIB") || exit 2
echo "goshim mode: $mode_line"
pass=0 fail=0 skip=0 failed=()
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=($(cd "$here/observe" && ls t_*.sh | sed 's/\.sh$//'))
for t in "${tests[@]}"; do
  if [ "${mode_line%% *}" = 1:1 ]; then
    printf 'SKIP %-28s needs M:N; goshim refused it: %s\n' "$t" "${mode_line#1:1 }"
    skip=$((skip + 1))
    continue
  fi
  T=$(mktemp -d /tmp/goshim-observe.XXXXXX)
  export T
  t0=$(date +%s.%N)
  timeout -s KILL 180 bash "$here/observe/$t.sh" >"$T/log" 2>&1
  rc=$?
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2fs", b-a}')
  if [ $rc = 0 ]; then
    printf 'PASS %-28s %s\n' "$t" "$dt"
    pass=$((pass + 1))
  elif [ $rc = 77 ]; then
    # The test cannot run here: its reason is its log's SKIP line.
    printf 'SKIP %-28s %s\n' "$t" "$(grep -m1 '^SKIP' "$T/log" | sed 's/^SKIP: //')"
    skip=$((skip + 1))
  else
    [ $rc = 137 ] && echo "    timed out after 180 s" >>"$T/log"
    printf 'FAIL %-28s %s\n' "$t" "$dt"
    sed -n '1,60p' "$T/log"
    fail=$((fail + 1))
    failed+=("$t")
  fi
  rm -rf "$T"
done
echo "observe tests: $pass passed, $fail failed, $skip skipped (goshim mode: ${mode_line%% *})"
if [ $fail -ne 0 ]; then
  printf '  failed: %s\n' "${failed[@]}"
  exit 1
fi
