#!/usr/bin/env bash
# Runs the observability and launcher tests: tests/observe/t_*.sh, each a
# script that runs ordinary programs (tests/observe/obs_*.c, built without
# goshim) under the library or the launcher and checks what goshim prints.
#
#   tests/run_observe.sh BUILD_DIR [test ...]
set -u
build=${1:?usage: run_observe.sh BUILD_DIR [test ...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$build" && pwd)
export LIB=$BUILD/libgoshim.so BIN=$BUILD/tests/observe LAUNCHER=$BUILD/goshim BUILD
pass=0 fail=0 failed=()
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=($(cd "$here/observe" && ls t_*.sh | sed 's/\.sh$//'))
for t in "${tests[@]}"; do
  T=$(mktemp -d /tmp/goshim-observe.XXXXXX)
  export T
  t0=$(date +%s.%N)
  timeout -s KILL 180 bash "$here/observe/$t.sh" >"$T/log" 2>&1
  rc=$?
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2fs", b-a}')
  if [ $rc = 0 ]; then
    printf 'PASS %-28s %s\n' "$t" "$dt"
    pass=$((pass + 1))
  else
    [ $rc = 137 ] && echo "    timed out after 180 s" >>"$T/log"
    printf 'FAIL %-28s %s\n' "$t" "$dt"
    sed -n '1,60p' "$T/log"
    fail=$((fail + 1))
    failed+=("$t")
  fi
  rm -rf "$T"
done
echo "observe tests: $pass passed, $fail failed"
if [ $fail -ne 0 ]; then
  printf '  failed: %s\n' "${failed[@]}"
  exit 1
fi
