#!/usr/bin/env python3
"""Queueing delays from a GOSHIM_TRACE file: for every "ready" event, the
time until that G's next slice starts on a P. Prints the distribution, the
share of wake-ups made without a P (the M blocked in netpoll, sysmon) and,
for a few of the longest waits, what each P ran meanwhile.

    bench/trace_waits.py TRACE.json [threshold_us=1000]
"""
import bisect
import collections
import json
import sys

path = sys.argv[1]
threshold = float(sys.argv[2]) if len(sys.argv) > 2 else 1000.0
ev = json.load(open(path))["traceEvents"]
slices = sorted((e for e in ev if e.get("cat") == "goroutine"), key=lambda e: e["ts"])
by_g = collections.defaultdict(list)
for e in slices:
    by_g[e["args"]["goid"]].append(e["ts"])
waits = []
for e in ev:
    if e["name"] != "ready" or e.get("cat") != "sched":
        continue
    starts = by_g.get(e["args"]["goid"], [])
    i = bisect.bisect_left(starts, e["ts"])
    if i < len(starts):
        waits.append((starts[i] - e["ts"], e))
if not waits:
    sys.exit("no ready event followed by a slice")
waits.sort(key=lambda w: w[0])
n = len(waits)
print(f"{n} wake-ups; ready to running (us):",
      ", ".join(f"p{q} {waits[min(n - 1, int(n * q / 100))][0]:.0f}" for q in (50, 90, 99, 99.9)),
      f"max {waits[-1][0]:.0f}")
nop = sum(1 for _, e in waits if e["pid"] == 2)
print(f"made without a P (netpoll blocked, sysmon): {100.0 * nop / n:.1f} %")
# By what the G had parked on (its previous slice's stop) and by who readied
# it: a P, an M without one (out of a blocking netpoll), or no M at all
# (sysmon: its netpoll when nobody polled for 10 ms; a foreign thread).
by_g_sl = collections.defaultdict(list)
for s in slices:
    by_g_sl[s["args"]["goid"]].append(s)
groups = collections.defaultdict(list)
for d, e in waits:
    sl = by_g_sl.get(e["args"]["goid"], [])
    i = bisect.bisect_right([s["ts"] for s in sl], e["ts"]) - 1
    on = sl[i]["args"].get("on", sl[i]["args"].get("stop", "?")) if i >= 0 else "?"
    who = "P" if e["pid"] == 1 else ("no M (sysmon)" if e["tid"] == 999 else "M without P")
    groups[(on, who)].append(d)
for (on, who), ds in sorted(groups.items(), key=lambda kv: -len(kv[1])):
    ds.sort()
    k = len(ds)
    print(f"  parked on {on}, readied by {who}: {k} ({100.0 * k / n:.1f} %), "
          f"p50 {ds[k // 2]:.0f} us, p90 {ds[min(k - 1, int(k * 0.9))]:.0f} us")
nprocs = 1 + max(e["tid"] for e in slices)
long_ = [w for w in waits if w[0] >= threshold]
print(f"{len(long_)} waits of {threshold:.0f} us or more")
for d, e in long_[-3:]:
    t0, t1 = e["ts"], e["ts"] + d
    print(f"  G{e['args']['goid']} waited {d:.0f} us from {t0:.0f}:")
    for p in range(nprocs):
        on = [s for s in slices if s["tid"] == p and s["ts"] + s["dur"] >= t0 and s["ts"] <= t1]
        if not on:
            print(f"    P{p}: ran nothing")
            continue
        top = max(on, key=lambda s: s["dur"])
        print(f"    P{p}: {len(on)} slices, busy {sum(s['dur'] for s in on):.0f} us, "
              f"longest {top['dur']:.0f} us ({top['name']}, {top['args'].get('stop')})")
