#!/bin/sh
# gcc must have hoisted __errno_location() out of errno_loop's loop: one
# call in the function, while the loop calls sched_yield.
bin=$1
calls=$(objdump -d --no-show-raw-insn "$bin" | awk '/<errno_loop>:/{f=1;next} f&&/^$/{exit} f' \
  | grep -c 'call.*<__errno_location')
yields=$(objdump -d --no-show-raw-insn "$bin" | awk '/<errno_loop>:/{f=1;next} f&&/^$/{exit} f' \
  | grep -c 'call.*<sched_yield')
if [ "$calls" -ne 1 ] || [ "$yields" -lt 1 ]; then
  echo "errno_loop: $calls calls to __errno_location, $yields to sched_yield (want 1 and >=1)"
  exit 1
fi
