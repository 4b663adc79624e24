#!/usr/bin/env python3
"""Checks a GOSHIM_TRACE file: valid Chrome trace-event JSON with the
event kinds goshim promises. Usage: check_trace.py FILE NPROCS [names...]"""
import collections
import json
import sys

path, nprocs = sys.argv[1], int(sys.argv[2])
names = sys.argv[3:]
errors = []
with open(path) as f:
    doc = json.load(f)  # must be valid JSON, as Perfetto and chrome://tracing need
ev = doc["traceEvents"]
for e in ev:
    for k in ("name", "ph", "pid"):
        if k not in e:
            errors.append(f"event without {k}: {e}")
            break
    if e.get("ph") in ("X", "i") and not isinstance(e.get("ts"), (int, float)):
        errors.append(f"event without a numeric ts: {e}")
    if e.get("ph") == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
        errors.append(f"slice without a duration: {e}")

slices = [e for e in ev if e.get("cat") == "goroutine"]
stops = collections.Counter(e["args"]["stop"] for e in slices)
inst = collections.Counter(e["name"] for e in ev if e.get("cat") == "sched")
blocking = [e for e in ev if e.get("cat") == "blocking"]
threads = {(e["pid"], e["args"]["name"]) for e in ev if e["name"] == "thread_name"}
procs = {e["args"]["name"] for e in ev if e["name"] == "process_name"}

def want(cond, what):
    if not cond:
        errors.append(what)

want(procs >= {"processors (P)", "kernel threads (M)"}, f"process tracks: {procs}")
for i in range(nprocs):
    want((1, f"P{i}") in threads, f"no track for P{i}")
want(any(p == 2 and n.startswith("M") for p, n in threads), "no M track")
want(all(0 <= e["tid"] < nprocs for e in slices), "a goroutine slice outside the P tracks")
for kind in ("parked", "exited"):
    want(stops[kind] > 0, f"no goroutine slice that ended {kind}: {dict(stops)}")
want(stops["blocking call"] > 0, f"no slice that ended in a blocking call: {dict(stops)}")
for kind in ("create", "ready"):
    want(inst[kind] > 0, f"no '{kind}' events: {dict(inst)}")
want(any(e["name"] == "fsync" for e in blocking), "no fsync blocking-call slice on an M track")
for n in names:
    if n.endswith("!"):  # an instant kind that must appear
        want(inst[n[:-1]] > 0, f"no '{n[:-1]}' events: {dict(inst)}")
    else:
        want(any(e["name"].endswith(" " + n) for e in slices), f"no slice named for thread '{n}'")
parked_on = collections.Counter(e["args"].get("on") for e in slices if e["args"]["stop"] == "parked")
want(parked_on["pthread_join"] > 0, f"no park on pthread_join: {dict(parked_on)}")

if errors:
    for e in errors[:20]:
        print("trace:", e)
    sys.exit(1)
print(f"trace ok: {len(ev)} events, slices {dict(stops)}, instants {dict(inst)}")
