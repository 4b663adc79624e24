#!/usr/bin/env python3
"""Resident memory of a running program's threads, native or under goshim.

    bench/thread_pages.py PID [LIBRARY]   (as root: reads pagemap and kpageflags)

LIBRARY: goshim's library when not named libgoshim.so.

Natively: every anonymous mapping of the size of a thread's stack that
holds a TCB at its top (glibc puts struct pthread and the static TLS block
there): its resident pages, and how deep below the thread pointer the
stack was written. Under goshim (libgoshim.so mapped in PID): every slot of
the G arena (core/proc.cpp, read through libgoshim's own symbols: the
library must be the one the process runs, with its symbol table), the
resident pages of its TLS block, TCB and in-slot stack, of each stack in a
mapping of its own (struct pthread's stackblock), and of the G array.
Pages mapped to the kernel's shared zero page are not counted (they are
not in RSS). It reads for seconds on a loaded machine: a native thread
that exits meanwhile shows as its cached stack (glibc returns it below the
exit frame less 16 KiB). bench/RESULTS.md, "Memory per connection again",
used it on MariaDB at bench/db.sh's steady point.
"""
import collections
import os
import struct
import subprocess
import sys

PAGE = 4096
STACKBLOCK = int(os.environ.get('STACKBLOCK', '1680'))  # struct pthread's stackblock (glibc 2.36 x86-64)


def main():
    pid = int(sys.argv[1])
    maps = []
    for line in open(f'/proc/{pid}/maps'):
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split('-'))
        maps.append((lo, hi, f[1], int(f[2], 16), f[5] if len(f) > 5 else ''))
    mem = open(f'/proc/{pid}/mem', 'rb', buffering=0)
    pm = open(f'/proc/{pid}/pagemap', 'rb', buffering=0)
    kf = open('/proc/kpageflags', 'rb', buffering=0)

    def rd(a, n):
        mem.seek(a)
        return mem.read(n)

    def q(a):
        return struct.unpack('<Q', rd(a, 8))[0]

    def resident(lo, hi):
        """One bool per page of [lo, hi): present and not the zero page."""
        lo &= ~(PAGE - 1)
        hi = (hi + PAGE - 1) & ~(PAGE - 1)
        n = (hi - lo) // PAGE
        pm.seek(lo // PAGE * 8)
        d = pm.read(n * 8)
        out = []
        for i in range(n):
            e = struct.unpack_from('<Q', d, i * 8)[0]
            if not e >> 63:
                out.append(False)
                continue
            pfn = e & ((1 << 55) - 1)
            kf.seek(pfn * 8)
            out.append(not (struct.unpack('<Q', kf.read(8))[0] >> 24) & 1)
        return out

    def depth_below(tp, lo, res):
        """How far below tp the lowest non-zero word of [lo, ...) lies."""
        low = next((j for j in range(len(res)) if res[j]), None)
        if low is None:
            return None
        pa = (lo & ~(PAGE - 1)) + low * PAGE
        try:
            b = rd(pa, PAGE)
        except OSError:
            return None
        nz = next((j for j in range(0, PAGE, 8) if b[j:j + 8] != bytes(8)), PAGE)
        return tp - (pa + nz)

    def kib_hist(c):
        return ', '.join(f'{k} KiB: {v}' for k, v in sorted(c.items()))

    def depth_hist(c):
        return ', '.join(f'{k / 1024:.1f}-{(k + 512) / 1024:.1f} KiB: {v}' for k, v in sorted(c.items()))

    want = os.path.realpath(sys.argv[2]) if len(sys.argv) > 2 else None
    lib = [(lo - off, path) for lo, hi, perm, off, path in maps
           if off == 0 and (path == want if want else path.endswith('/libgoshim.so'))]
    if not lib:
        # Native: glibc stacks, TCB (tcbhead: tcb and self point at it) near the top.
        pages = collections.Counter()
        depth = collections.Counter()
        total = n = 0
        for lo, hi, perm, off, path in maps:
            if path or perm != 'rw-p' or hi - lo < 4 * PAGE or hi - lo > 64 << 20:
                continue
            try:
                top = rd(hi - 2 * PAGE, 2 * PAGE)
            except OSError:  # not readable (a guard region)
                continue
            tp = next((hi - 2 * PAGE + j for j in range(0, 2 * PAGE - 24, 64)
                       if struct.unpack_from('<Q', top, j)[0] == hi - 2 * PAGE + j and
                       struct.unpack_from('<Q', top, j + 16)[0] == hi - 2 * PAGE + j), None)
            if tp is None:
                continue
            res = resident(lo, hi)
            r = sum(res) * 4
            n += 1
            total += r
            pages[r] += 1
            d = depth_below(tp, lo, res)
            if d is not None:
                depth[d // 512 * 512] += 1
        print(f'native: {n} thread stacks (stack, static TLS and TCB in one mapping): '
              f'{total} KiB resident, {total / max(n, 1):.1f} KiB each')
        print(f'  resident KiB per thread: {kib_hist(pages)}')
        print(f'  stack written down to, below the thread pointer: {depth_hist(depth)}')
        return

    base, libpath = lib[0]
    syms = {}
    for line in subprocess.run(['nm', '-C', libpath], capture_output=True, text=True).stdout.splitlines():
        f = line.split(' ', 2)
        if len(f) == 3 and f[0]:
            syms[f[2]] = int(f[0], 16)
    anon = 'goshim::(anonymous namespace)::'
    arena_lo = q(base + syms[anon + 'arena_lo'])
    slot_size = q(base + syms[anon + 'slot_size'])
    slot_tp = q(base + syms[anon + 'slot_tp'])
    nslots = q(base + syms[anon + 'nslots'])
    garena = q(base + syms[anon + 'garena'])
    g_stride = q(base + syms[anon + 'g_stride'])
    below_tp = q(base + syms['goshim::tls::L'] + 24)  # tls::Layout::below_tp
    print(f'goshim: {nslots} slots of {slot_size} bytes, static TLS below tp {below_tp} bytes, '
          f'G stride {g_stride}')
    slot_k = own_k = nown = 0
    slot_pages = collections.Counter()
    own_pages = collections.Counter()
    depth = collections.Counter()
    for i in range(nslots):
        sbase = arena_lo + i * slot_size
        tp = sbase + slot_tp
        top = (tp + PAGE - 1) & ~(PAGE - 1)
        res = resident(sbase, top)
        r = sum(res) * 4
        slot_k += r
        slot_pages[r] += 1
        d = depth_below(tp, sbase, res)
        sb, sz = struct.unpack('<QQ', rd(tp + STACKBLOCK, 16))
        if sz and not (sbase <= sb < top):
            rr = resident(sb, sb + sz)
            o = sum(rr) * 4
            own_k += o
            nown += 1
            own_pages[o] += 1
            # In a mapping of its own: the depth below its top, plus the TLS block.
            d2 = depth_below(sb + sz, sb, rr)
            if d2 is not None:
                d = d2 + below_tp
        if d is not None:
            depth[d // 512 * 512] += 1
    g_k = sum(resident(garena, garena + nslots * g_stride)) * 4
    print(f'  slots (TCB, static TLS, in-slot stacks): {slot_k} KiB, {slot_k / max(nslots, 1):.1f} each; '
          f'per slot: {kib_hist(slot_pages)}')
    print(f'  stacks in mappings of their own: {nown}, {own_k} KiB'
          + (f'; per stack: {kib_hist(own_pages)}' if nown else ''))
    print(f'  G array: {g_k} KiB')
    print(f'  total {slot_k + own_k + g_k} KiB, {(slot_k + own_k + g_k) / max(nslots, 1):.1f} KiB per slot')
    print(f'  stack written down to, below the thread pointer: {depth_hist(depth)}')


main()
