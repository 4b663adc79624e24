#!/usr/bin/env bash
# Builds and tests this tree inside fresh Debian chroots (make test-distros).
#
#   tests/distros.sh [suite ...]        default: trixie bookworm bullseye
#
# Each suite's pristine root (debootstrap --variant=minbase, plus the
# packages `make deps` installs and clang) is made once, with network, and
# kept under $GOSHIM_DISTRO_CACHE (default /root/.cache/goshim-distros):
#   $cache/<suite>/            the root, never modified after it is made
#   $cache/<suite>/.goshim-ready
# After that, runs need no network. Each run mounts a fresh overlay on top of
# the pristine root (or, if overlayfs is not available, copies it), copies
# the working tree in (tracked and untracked, not ignored, files: what
# `git ls-files` lists), and runs `make deps` and `make test` as root.
#
# Nothing on the host changes: the script runs in its own mount and PID
# namespaces (unshare --mount --pid, private propagation), as the
# namespace's first process. Every mount it makes (/proc, /dev, /dev/pts,
# /dev/shm, /sys, the overlay) disappears with the mount namespace, and
# when the script ends, however it ends (SIGKILL too), the kernel kills
# every process left in the PID namespace, so nothing keeps the namespace
# (and its mounts) alive. The chroot gets a policy-rc.d that forbids
# starting services; the cleanup trap also kills the running step's
# process group and descendants and the processes rooted in the chroot,
# unmounts explicitly and removes the run's directory (which a SIGKILL
# leaves behind, unmounted, under the cache directory).
#
# Environment:
#   GOSHIM_DISTRO_CACHE   cache directory (default /root/.cache/goshim-distros)
#   GOSHIM_DISTRO_MIRROR  Debian mirror (default http://deb.debian.org/debian)
#   GOSHIM_DISTRO_KEEP=1  keep the run directory (logs are kept anyway)
#   GOSHIM_DISTRO_BASE_ONLY=1  only make the missing pristine roots
#   GOSHIM_DISTRO_CMD     what runs in /src (default: make deps, then
#                         make -j<cpus> WERROR=1 all, then make test's parts
#                         (unit, preload, programs, observe; each even if an
#                         earlier one failed), then make clang-check on the
#                         suites in GOSHIM_DISTRO_CLANG (default: trixie
#                         bookworm))
#   GOSHIM_DISTRO_TIMEOUT       seconds one suite's run in /src may take
#                               (default 3600); then it is killed and fails
#   GOSHIM_DISTRO_TIMEOUT_BASE  seconds each step of making a pristine root
#                               may take (debootstrap, apt-get update, the
#                               installs; default 1800)
# Logs: build/distros/<suite>.log; summary: build/distros/summary.txt
# (GOSHIM_DISTRO_OUT: another directory for them).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cache=${GOSHIM_DISTRO_CACHE:-/root/.cache/goshim-distros}
mirror=${GOSHIM_DISTRO_MIRROR:-http://deb.debian.org/debian}
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(trixie bookworm bullseye)

die() { echo "test-distros: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts)"
for s in "${suites[@]}"; do
  case $s in trixie|bookworm|bullseye) ;; *) die "unknown suite '$s' (trixie, bookworm, bullseye)";; esac
done

# Re-run inside private mount and PID namespaces (with their own /proc):
# every mount below is gone, and every process it started is killed, when
# this script's process (the namespace's init) exits, even on SIGKILL.
# unshare passes a SIGTERM it dies of on to the script (--kill-child).
if [ "${GOSHIM_DISTRO_NS:-}" != inside ]; then
  command -v unshare >/dev/null || die "unshare (util-linux) is missing"
  exec unshare --mount --propagation private --pid --fork --kill-child=SIGTERM --mount-proc -- \
    env GOSHIM_DISTRO_NS=inside bash "$0" "$@"
fi

# clang: the suites whose clang builds goshim (clang 11 in Debian 11 does not).
clang_suites=" ${GOSHIM_DISTRO_CLANG-trixie bookworm} "
outdir=${GOSHIM_DISTRO_OUT:-$here/build/distros}
mkdir -p "$outdir" "$cache"
run=""          # the current run directory
root=""         # the current chroot

# Packages of the pristine root besides debootstrap's minbase. `make deps`
# adds the rest (it reads the Makefile's list), with network, once.
BASE_EXTRA="make clang"

unmount_under() {     # unmount everything mounted at or below $1, deepest first
  local d=$1 m
  [ -n "$d" ] || return 0
  while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done < <(awk -v d="$d" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r)
}

kill_rooted() {       # kill the processes whose root is $1 (started by this run)
  local d=$1 p r
  [ -n "$d" ] || return 0
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    [ "$r" = "$d" ] && kill -KILL "${p#/proc/}" 2>/dev/null || true
  done
}

cleanup() {
  local rc=$?
  # A second signal (the group's and unshare's --kill-child) must not cut
  # the cleanup short.
  trap - EXIT
  trap '' INT TERM HUP
  [ -n "$bg_pid" ] && kill_tree "$bg_pid"
  if [ -n "$root" ]; then
    kill_rooted "$root"
    unmount_under "$root"
  fi
  if [ -n "$run" ] && [ -d "$run" ]; then
    unmount_under "$run"
    if [ "${GOSHIM_DISTRO_KEEP:-0}" = 1 ]; then
      echo "test-distros: kept $run" >&2
    else
      rm -rf --one-file-system "$run"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

mount_api() {         # the kernel file systems a build and the tests need
  local r=$1
  mount -t proc proc "$r/proc"
  mount --bind /dev "$r/dev"
  mount --make-private "$r/dev"
  mount --bind /dev/pts "$r/dev/pts"
  mount -t tmpfs -o mode=1777,nosuid,nodev shm "$r/dev/shm"
  mount --rbind /sys "$r/sys"
  mount --make-rprivate "$r/sys"
  mount -o remount,bind,ro "$r/sys" 2>/dev/null || true
  mount -t tmpfs -o mode=1777 tmp "$r/tmp"
}

setup_root() {        # things every chroot needs before apt or make run in it
  local r=$1
  printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
  chmod 755 "$r/usr/sbin/policy-rc.d"
  cp /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
  # minbase makes no /etc/hosts in Debian 11 and 12 (netbase does it in 13):
  # without one, "localhost" does not resolve (tests/preload/resolver_system).
  [ -s "$r/etc/hosts" ] ||
    printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$r/etc/hosts"
  mkdir -p "$r/src"
}

# Every step has a time limit: a hung download or test fails the run
# instead of holding the machine (cleanup then kills what remains).
timeout_run=${GOSHIM_DISTRO_TIMEOUT:-3600}
timeout_base=${GOSHIM_DISTRO_TIMEOUT_BASE:-1800}
step_timeout=$timeout_base      # the limit waitfor applies; test_suite sets it

bg_pid=""
waitfor() {           # runs "$@" in the background and waits: a signal to
  local rc=0          # this script runs its trap (cleanup) at once instead
                      # of after the command, and cleanup ends the command.
  # bash makes a plain background command ignore SIGINT and SIGQUIT, and
  # the tests inherit that (signals_wait takes SIGINT): reset both.
  # timeout(1) ends it after $step_timeout seconds (TERM, then KILL 30 s
  # later); it exits 124 then.
  ( trap - INT QUIT; exec timeout -k 30 "$step_timeout" "$@" ) &
  bg_pid=$!
  wait "$bg_pid" || rc=$?
  bg_pid=""
  [ $rc -ne 124 ] && [ $rc -ne 137 ] ||
    echo "test-distros: timed out after $step_timeout s: $*" >&2
  return $rc
}

kill_tree() {         # kill process $1, its process group and its descendants
  # (timeout(1) in waitfor leads its own process group). One pass over
  # /proc for the parent links, then every process found is killed at once.
  local -A kids=()
  local p pp all=() todo=("$1")
  while read -r p pp; do kids[$pp]+=" $p"; done < <(
    sed -nE 's/^([0-9]+) \(.*\) [A-Za-z] ([0-9]+) .*/\1 \2/p' /proc/[0-9]*/stat 2>/dev/null)
  while [ ${#todo[@]} -gt 0 ]; do
    p=${todo[0]}; todo=("${todo[@]:1}")
    all+=("$p")
    for pp in ${kids[$p]:-}; do todo+=("$pp"); done
  done
  kill -KILL -- "-$1" 2>/dev/null || true
  kill -KILL "${all[@]}" 2>/dev/null || true
}

in_root() {           # in_root ROOT CMD...: a clean environment, as root
  local r=$1; shift
  waitfor chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive "$@" </dev/null
}

copy_tree() {         # the working tree (tracked + untracked, not ignored)
  local dst=$1
  mkdir -p "$dst"
  (cd "$here" && git ls-files -z --cached --others --exclude-standard |
     while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
     tar --null -T - -cf -) | tar -xf - -C "$dst"
}

install_deps() {      # make deps (and BASE_EXTRA) in root $1, with network
  local s=$1 r=$2
  setup_root "$r"
  mount_api "$r"
  copy_tree "$r/src"
  {
    in_root "$r" apt-get update -qq &&
    in_root "$r" apt-get install -y -qq --no-install-recommends $BASE_EXTRA &&
    in_root "$r" make -C /src deps &&
    in_root "$r" apt-get clean
  } >"$outdir/$s.base.log" 2>&1 ||
    { tail -n 30 "$outdir/$s.base.log"; die "$s: installing packages failed (log: $outdir/$s.base.log)"; }
  kill_rooted "$r"
  unmount_under "$r"
  rm -rf --one-file-system "$r/src" "$r/tmp/"* "$r/var/lib/apt/lists/"* 2>/dev/null || true
  mkdir -p "$r/src"
}

make_base() {         # the pristine root of suite $1, made once
  local s=$1 base=$cache/$1 want
  want="$(make -s -C "$here" deps-list) $BASE_EXTRA"
  if [ -f "$base/.goshim-ready" ]; then
    [ "$(cat "$base/.goshim-ready")" = "$want" ] && return 0
    # `make deps` would install something new in every run: add it to the
    # cached root once (needs network).
    echo "== $s: the package list changed; updating $base (needs network)"
    run=""; root=$base
    install_deps "$s" "$base"
    echo "$want" >"$base/.goshim-ready"
    run=""; root=""
    return 0
  fi
  command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
  echo "== $s: making the pristine root in $base (debootstrap, needs network)"
  local tmp=$cache/$s.new
  rm -rf --one-file-system "$tmp"
  run=$tmp; root=$tmp
  local t0=$SECONDS
  # A network error of the mirror fails debootstrap; it is tried 3 times
  # (a timeout is not retried), each time from an empty directory.
  local try rc
  for try in 1 2 3; do
    rc=0
    waitfor debootstrap --variant=minbase "$s" "$tmp" "$mirror" >"$outdir/$s.debootstrap.log" 2>&1 || rc=$?
    [ $rc -eq 0 ] && break
    unmount_under "$tmp"
    [ $rc -eq 124 ] || [ $rc -eq 137 ] || [ $try -eq 3 ] && break
    echo "== $s: debootstrap failed (exit $rc, attempt $try of 3); trying again"
    tail -n 5 "$outdir/$s.debootstrap.log"
    rm -rf --one-file-system "$tmp"
  done
  [ $rc -eq 0 ] ||
    { tail -n 20 "$outdir/$s.debootstrap.log"; die "$s: debootstrap failed (log: $outdir/$s.debootstrap.log)"; }
  unmount_under "$tmp"
  # apt-get in the root (here and in make deps) retries a failed download.
  echo 'Acquire::Retries "5";' >"$tmp/etc/apt/apt.conf.d/80goshim-retries"
  install_deps "$s" "$tmp"
  echo "$want" >"$tmp/.goshim-ready"
  mv "$tmp" "$base"
  run=""; root=""
  echo "== $s: pristine root made in $((SECONDS - t0)) s"
}

test_suite() {        # one fresh run of suite $1; appends to the summary
  local s=$1 base=$cache/$1 log=$outdir/$1.log
  run=$(mktemp -d "$cache/run-$s.XXXXXX")
  root=$run/root
  mkdir -p "$root" "$run/upper" "$run/work"
  if ! mount -t overlay overlay \
      -o "lowerdir=$base,upperdir=$run/upper,workdir=$run/work" "$root" 2>/dev/null; then
    cp -a "$base/." "$root/"
  fi
  setup_root "$root"
  mount_api "$root"
  copy_tree "$root/src"
  local glibc gcc t0=$SECONDS rc=0
  glibc=$(in_root "$root" getconf GNU_LIBC_VERSION)
  gcc=$(in_root "$root" gcc -dumpfullversion)
  echo "== $s: $glibc, gcc $gcc; log: $log"
  # make test's parts, each run even when an earlier one failed (make test
  # stops at the first), so that one run reports everything; clang-check
  # last, on its own.
  local cmd='s=$SECONDS; make deps && make -j"$(nproc)" WERROR=1 all && echo "== part build: $((SECONDS - s)) s" && { rc=0; for t in unit preload programs observe'
  [[ $clang_suites == *" $s "* ]] && cmd+=' clang-check'
  cmd+='; do s=$SECONDS; make -j"$(nproc)" $t || rc=1; echo "== part $t: $((SECONDS - s)) s"; done; exit $rc; }'
  cmd=${GOSHIM_DISTRO_CMD:-$cmd}
  step_timeout=$timeout_run
  in_root "$root" bash -c "cd /src && $cmd" >"$log" 2>&1 || rc=$?
  step_timeout=$timeout_base
  local dt=$((SECONDS - t0))
  local unit preload programs observe mode
  unit=$(grep -ho 'Tested: [0-9]* | Passing: [0-9]* | Failing: [0-9]* | Crashing: [0-9]*' "$log" |
         awk '{t+=$2; p+=$5; f+=$8; c+=$11} END {printf "%d tested, %d passed, %d failed, %d crashed", t, p, f, c}')
  preload=$(grep -h '^preload tests:' "$log" | tail -n 1 | sed 's/^preload tests: //')
  programs=$(grep -h '^programs tests:' "$log" | tail -n 1 | sed 's/^programs tests: //')
  observe=$(grep -h '^observe tests:' "$log" | tail -n 1 | sed 's/^observe tests: //')
  mode=$(grep -h '^goshim mode:' "$log" | tail -n 1 | awk '{print $3}')
  local clang
  clang=$(grep -h '^clang-check: ' "$log" | tail -n 1 | sed -e 's/^clang-check: //' -e 's/Debian clang version/clang/')
  local parts
  parts=$(sed -n 's/^== part \([a-z-]*\): \([0-9]*\) s$/\1 \2s/p' "$log" | paste -sd, - | sed 's/,/, /g')
  local verdict=PASS
  [ $rc -eq 0 ] || verdict="FAIL (make exit $rc)"
  local line
  line=$(printf '%-8s %-12s gcc %-7s mode %-5s %4ds  unit: %s; preload: %s; programs: %s; observe: %s; %s  %s' \
    "$s" "$glibc" "$gcc" "${mode:-?}" "$dt" "$unit" "${preload:-none}" "${programs:-none}" "${observe:-none}" \
    "${clang:-no clang-check}" "$verdict")
  [ -n "$parts" ] && line+="  (times: $parts)"
  echo "$line" | tee -a "$outdir/summary.txt"
  [ $rc -eq 0 ] || { grep -E '^(FAIL|  failed:)|\[FAIL\]|Error' "$log" | head -n 40 | sed 's/^/    | /'; }
  kill_rooted "$root"
  unmount_under "$root"
  unmount_under "$run"
  [ "${GOSHIM_DISTRO_KEEP:-0}" = 1 ] && echo "test-distros: kept $run" >&2 || rm -rf --one-file-system "$run"
  run=""; root=""
  return $rc
}

main() {
  local s status=0
  for s in "${suites[@]}"; do
    make_base "$s"
  done
  [ "${GOSHIM_DISTRO_BASE_ONLY:-0}" = 1 ] && return 0
  : >"$outdir/summary.txt"
  for s in "${suites[@]}"; do
    test_suite "$s" || status=1
  done
  echo "== summary ($outdir/summary.txt)"
  cat "$outdir/summary.txt"
  return $status
}

# One line: bash has read all of it before it runs, so editing this file
# meanwhile cannot change a run.
main; exit $?
