#!/bin/sh
# How C++20 waits reach the kernel on this machine, which goshim's syscall()
# interposer must cover: libstdc++ 12's header code (atomic::wait,
# counting_semaphore, latch, barrier) calls syscall(SYS_futex) through the
# PLT from the program, and libstdc++.so itself (futures, static guards)
# has no inline `syscall` instruction of its own.
# (OBJDUMP: the target's objdump in a cross build, where ldd cannot list
# the target's libraries: the libstdc++ part is then not checked.)
bin=$1
objdump=${OBJDUMP:-objdump}
plt=$($objdump -d --no-show-raw-insn "$bin" | grep -Ec '(call|bl)[[:space:]].*<syscall@plt>')
if [ "$plt" -lt 1 ]; then
  echo "sync_cxx: no call to syscall@plt: libstdc++'s atomic waits changed route"
  exit 1
fi
lib=$(ldd "$bin" 2>/dev/null | awk '/libstdc\+\+/{print $3}')
if [ -n "$lib" ]; then
  inline=$($objdump -d --no-show-raw-insn "$lib" | grep -cw 'syscall$')
  if [ "$inline" -ne 0 ]; then
    echo "sync_cxx: $lib has $inline inline syscall instructions (goshim cannot see those)"
    exit 1
  fi
fi
