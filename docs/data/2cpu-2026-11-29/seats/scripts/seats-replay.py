#!/usr/bin/env python3
"""Replays validation evidence with two builds of vmbench (the simulation
is all that differs) and compares, per evidence file, the threads-mode
rows within +-15 %, and every row's error under each build."""
import json, subprocess, sys, tempfile, statistics
OLD, NEW = sys.argv[1], sys.argv[2]
def replay(b, ev):
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([b, "project", "--validate", "--replay", ev, "--json", "--out", d], capture_output=True, text=True)
    return {(o["workload"], o["config"], o["cpus"]): o for o in map(json.loads, (l for l in r.stdout.splitlines() if l.startswith("{")))}
tot = {"old": 0, "new": 0, "n": 0}
for ev in sys.argv[3:]:
    a, b = replay(OLD, ev), replay(NEW, ev)
    thr = [k for k in a if a[k]["mode"] == "threads"]
    ok = lambda d: sum(abs(d[k]["error"]) <= 0.15 for k in thr)
    allok = lambda d: sum(abs(d[k]["error"]) <= 0.15 for k in d)
    tot["old"] += ok(a); tot["new"] += ok(b); tot["n"] += len(thr)
    print(f"{ev}: threads within {ok(a)} -> {ok(b)} of {len(thr)}; all {allok(a)} -> {allok(b)} of {len(a)}")
    for k in sorted(thr):
        ca = {c['class']: c['predicted'] for c in a[k].get('contended', [])}
        cb = {c['class']: c['predicted'] for c in b[k].get('contended', [])}
        cm = {c['class']: c['measured'] for c in b[k].get('contended', [])}
        print(f"   {k[0]:12} {k[1]:15} {k[2]}: {a[k]['error']*100:+6.1f} -> {b[k]['error']*100:+6.1f} %   anon_vma contended {ca.get('anon_vma',0)*100:.0f} -> {cb.get('anon_vma',0)*100:.0f} (lab {cm.get('anon_vma',0)*100:.1f}); mmap_lock {ca.get('mmap_lock',0)*100:.0f} -> {cb.get('mmap_lock',0)*100:.0f} (lab {cm.get('mmap_lock',0)*100:.0f})")
print("total threads rows within:", tot)
