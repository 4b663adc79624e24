#!/bin/sh
# gcc must have hoisted __errno_location() out of errno_loop's loop: one
# call in the function, while the loop calls sched_yield.
# (OBJDUMP: the target's objdump in a cross build; a call is `call` on
# x86-64, `callq` in binutils before 2.36 (Debian 11), and `bl` on aarch64.)
bin=$1
objdump=${OBJDUMP:-objdump}
calls=$($objdump -d --no-show-raw-insn "$bin" | awk '/<errno_loop>:/{f=1;next} f&&/^$/{exit} f' \
  | grep -Ec '(callq?|bl)[[:space:]].*<__errno_location')
yields=$($objdump -d --no-show-raw-insn "$bin" | awk '/<errno_loop>:/{f=1;next} f&&/^$/{exit} f' \
  | grep -Ec '(callq?|bl)[[:space:]].*<sched_yield')
if [ "$calls" -ne 1 ] || [ "$yields" -lt 1 ]; then
  echo "errno_loop: $calls calls to __errno_location, $yields to sched_yield (want 1 and >=1)"
  exit 1
fi
