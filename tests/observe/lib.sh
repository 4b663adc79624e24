# Helpers for the observability tests (sourced by tests/observe/t_*.sh).
# The runner exports: LIB (libgoshim.so), BIN (the test programs),
# LAUNCHER (build/goshim), T (a scratch directory for this test).
set -u

fails=0
fail() { echo "    FAIL: $*"; fails=$((fails + 1)); }
ok() { :; }
done_test() { [ "$fails" -eq 0 ]; exit $?; }

# under_goshim PROCS cmd... : the command with the library preloaded.
under_goshim() {
  local procs=$1
  shift
  env LD_PRELOAD="$LIB" GOSHIM_MAXPROCS="$procs" "$@"
}

# contains FILE PATTERN WHAT : FILE has a line matching the ERE PATTERN.
contains() {
  grep -Eq -- "$2" "$1" || { fail "$3: no line matching /$2/ in $(basename "$1")"; sed 's/^/      | /' "$1" | head -n 40; }
}
lacks() {
  ! grep -Eq -- "$2" "$1" || fail "$3: unexpected line matching /$2/"
}

# wait_for FILE PATTERN SECONDS : until FILE has a line matching PATTERN.
wait_for() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -Eq -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
