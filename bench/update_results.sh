#!/usr/bin/env bash
# Puts the table of the last `make bench` (BUILD/bench/results.md) into
# bench/RESULTS.md between its two marker lines, replacing what was there.
#   bench/update_results.sh TABLE RESULTS_MD
set -eu
table=${1:?usage: bench/update_results.sh TABLE RESULTS_MD}
md=${2:?usage: bench/update_results.sh TABLE RESULTS_MD}
begin='<!-- make bench table: begin -->'
end='<!-- make bench table: end -->'
grep -qF "$begin" "$md" && grep -qF "$end" "$md" || { echo "$md: no marker lines" >&2; exit 1; }
tmp=$(mktemp)
awk -v b="$begin" -v e="$end" -v t="$table" '
  $0 == b { print; while ((getline l < t) > 0) print l; skip = 1; next }
  $0 == e { skip = 0 }
  !skip { print }' "$md" >"$tmp"
mv "$tmp" "$md"
echo "updated $md from $table"
