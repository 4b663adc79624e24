#!/usr/bin/env bash
# Does moving a 3 KB initial-exec TLS block from before libc's TLS to
# beyond it change how many pages an idle thread keeps resident? Natively,
# with glibc's own threads (which carve the static TLS from the top of the
# stack, as goshim's slots do): a stand-in library with the shape of
# libgoshim.so's TLS (jemalloc's 2,632-byte thread state as .tdata, non-zero
# where je_tsd_tls's image is, and 348 bytes of .tbss) is
#   A: preloaded (module 2: between the thread pointer and libc's TLS), or
#   B: a dependency of a preloaded library (loaded after libc: beyond it),
# and bench/idle_pages counts the resident pages around every thread
# pointer. bench/RESULTS.md, "The static TLS route".
#   bench/tls_route.sh [BUILD=build] [threads=3000] [LDSO LIBDIR]
# With LDSO and LIBDIR (another glibc's ld.so and library directory, e.g. a
# Debian 13 root's) the programs run under that glibc.
set -e
B=${1:-build}
N=${2:-3000}
LDSO=${3:-}
LIBDIR=${4:-}
W=$B/tls_route
mkdir -p "$W"
cat >"$W/big.c" <<'C'
__attribute__((tls_model("initial-exec"))) __thread struct { char b[2632]; } big_tdata = {{
  [152] = 1, [161] = 1, [432] = 1, [600] = 1, [816] = 1 }};
__attribute__((tls_model("initial-exec"))) __thread char big_tbss[348];
int big_touch(void) { return big_tdata.b[152] + big_tbss[0]; }
C
cat >"$W/pre.c" <<'C'
extern int big_touch(void);
int pre_touch(void) { return big_touch(); }
C
cc -O2 -fPIC -shared -o "$W/libbig.so" "$W/big.c"
cc -O2 -fPIC -shared -o "$W/libpre.so" "$W/pre.c" -L"$W" -lbig -Wl,-rpath,"$(cd "$W" && pwd)"
for v in none A B; do
  case $v in none) P= ;; A) P=$W/libbig.so ;; B) P=$W/libpre.so ;; esac
  echo "== $v"
  for prog in "$B/bench/tls_layout" "$B/bench/idle_pages $N"; do
    if [ -n "$LDSO" ]; then
      "$LDSO" --library-path "$LIBDIR:$W" ${P:+--preload "$P"} $prog
    else
      env ${P:+LD_PRELOAD="$P"} $prog
    fi | grep -E '^(modid|_dl_get|RESULT|page tp|stack top|stack written)' |
      awk '/^modid/ && seen[$0]++ {next} {print}'
  done
done
