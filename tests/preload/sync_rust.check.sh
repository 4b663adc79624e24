#!/bin/sh
# How Rust std's waits reach the kernel on this machine: libc::syscall
# through the GOT (SYS_futex, FUTEX_WAIT_BITSET|PRIVATE and
# FUTEX_WAKE|PRIVATE), no inline `syscall` instruction. goshim's syscall()
# interposer covers exactly that route.
bin=$1
if ! objdump -R "$bin" | grep -qw 'syscall@GLIBC_2.2.5'; then
  echo "sync_rust: the binary does not import syscall(): Rust std changed route"
  exit 1
fi
inline=$(objdump -d --no-show-raw-insn "$bin" | grep -cw 'syscall$')
if [ "$inline" -ne 0 ]; then
  echo "sync_rust: $inline inline syscall instructions (goshim cannot see those)"
  exit 1
fi
