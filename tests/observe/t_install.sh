#!/usr/bin/env bash
# make install PREFIX=...: the launcher finds the installed library, the
# man page is in place, and an installed goshim runs programs M:N.
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
make -s -C "$root" install PREFIX="$T/prefix" BUILD="$BUILD" >"$T/make.out" 2>&1 ||
  { fail "make install failed"; cat "$T/make.out"; }
for f in bin/goshim lib/goshim/libgoshim.so share/man/man1/goshim.1; do
  [ -f "$T/prefix/$f" ] || fail "$f not installed"
done
"$T/prefix/bin/goshim" --version >"$T/out" 2>&1 || fail "installed goshim --version"
# The installed launcher must use the installed library, not the build's.
"$T/prefix/bin/goshim" -- "$BIN/obs_exit" env LD_PRELOAD >"$T/out" 2>&1
contains "$T/out" "^$T/prefix/lib/goshim/libgoshim\.so\$" "installed launcher preloads the installed library"
"$T/prefix/bin/goshim" --procs 2 -- "$BIN/obs_exit" threads 300 >"$T/out" 2>&1 || fail "installed run failed"
k=$(awk '/^kernel threads/{print $3}' "$T/out")
[ -n "$k" ] && [ "$k" -le 6 ] || fail "installed goshim: $k kernel threads for 300 live threads"
# man-db is one of make deps' packages: its absence is a failure, not a pass.
if command -v man >/dev/null; then
  man -l "$T/prefix/share/man/man1/goshim.1" 2>/dev/null | grep -q 'compare' || fail "man page does not render"
else
  fail "man is not installed (make deps installs man-db)"
fi
done_test
