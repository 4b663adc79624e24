#!/usr/bin/env bash
# Prints the mode goshim runs programs in on this system:
#   M:N            goroutines on a few kernel threads
#   1:1 <reason>   goshim refused M:N at start-up (its one warning line,
#                  "goshim: warning: <reason>; running every thread as a
#                  kernel thread (no M:N)"), e.g. on glibc older than 2.34.
# The test runners use it to know which mode to expect, and then check
# every run against it (tests/run_preload.sh, tests/run_observe.sh).
#
#   tests/goshim_mode.sh path/to/libgoshim.so
set -u
lib=${1:?usage: goshim_mode.sh LIBGOSHIM}
unset_goshim=()
for v in $(compgen -e | grep '^GOSHIM_'); do unset_goshim+=(-u "$v"); done
# Under emulation (TEST_EMU, see run_preload.sh) a program of the target
# (TEST_TRUE) runs instead of /bin/true.
emu=(${TEST_EMU:-})
if [ ${#emu[@]} -gt 0 ]; then
  pre=(QEMU_SET_ENV="LD_PRELOAD=$lib")
  prog=${TEST_TRUE:?TEST_TRUE: a program of the emulated target}
else
  pre=(LD_PRELOAD="$lib")
  prog=/bin/true
fi
err=$(timeout -s KILL 60 env "${unset_goshim[@]}" "${pre[@]}" "${emu[@]}" "$prog" 2>&1 >/dev/null) || {
  echo "goshim_mode.sh: /bin/true failed under $lib: $err" >&2
  exit 2
}
refusal='^goshim: warning: (.*); running every thread as a kernel thread \(no M:N\)$'
if [[ $err =~ $refusal ]]; then
  echo "1:1 ${BASH_REMATCH[1]}"
elif [ -n "$err" ]; then
  echo "goshim_mode.sh: unexpected output under $lib: $err" >&2
  exit 2
else
  echo "M:N"
fi
