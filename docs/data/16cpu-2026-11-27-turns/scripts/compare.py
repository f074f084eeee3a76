#!/usr/bin/env python3
"""Replays validation evidence twice, as recorded and with every profile's
`interleaved` operations removed (the method before threads took turns),
and prints, at each worker count, the threads-mode rows' median |error|
and how many are within ±15 %, and the same over every row.

    python3 docs/data/16cpu-2026-11-27-turns/scripts/compare.py \
        [--overlap X] [--rows] [--vmbench PATH] EVIDENCE.jsonl.gz...

--overlap sets every measured run's machine description's overlap to X
before replaying both, so that evidence from leases whose `topology
--measure` disagreed is compared under one description. --rows also
prints each threads-mode row's error at 2 workers.
"""
import argparse, gzip, json, os, statistics, subprocess, sys, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--overlap", type=float)
ap.add_argument("--rows", action="store_true")
ap.add_argument("--vmbench", default="target/release/vmbench")
ap.add_argument("evidence", nargs="+")
a = ap.parse_args()

def replay(lines, tmp, name):
    path = os.path.join(tmp, name + ".jsonl.gz")
    with gzip.open(path, "wt") as f:
        for d in lines:
            f.write(json.dumps(d) + "\n")
    out = subprocess.run([a.vmbench, "project", "--replay", path, "--json",
                          "--out", os.path.join(tmp, name)],
                         capture_output=True, text=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.strip()]

def summary(rows):
    """Per worker count: the threads rows' median |error| and how many are
    within ±15 %, then the same over every row."""
    cells = []
    for c in sorted({r["cpus"] for r in rows}):
        at = [r for r in rows if r["cpus"] == c]
        t = [abs(r["error"]) for r in at if r["mode"] == "threads"]
        e = [abs(r["error"]) for r in at]
        cell = f"x{c}"
        if t:
            cell += f" threads {statistics.median(t) * 100:5.1f}% {sum(x <= 0.15 for x in t):2}/{len(t)}"
        cell += f" all {statistics.median(e) * 100:5.1f}% {sum(x <= 0.15 for x in e):2}/{len(e)}"
        cells.append(cell)
    return "\n           ".join(cells)

with tempfile.TemporaryDirectory() as tmp:
    for ev in a.evidence:
        lines = [json.loads(l) for l in gzip.open(ev, "rt")]
        if a.overlap is not None:
            for d in lines:
                for p in d["points"]:
                    for m in p["machines"]:
                        m["overlap"] = a.overlap
        before = [json.loads(json.dumps(d)) for d in lines]
        for d in before:
            d["profile"].pop("interleaved", None)
        print(ev)
        alone, turns = replay(before, tmp, "before"), replay(lines, tmp, "turns")
        print("  alone  ", summary(alone))
        print("  turns  ", summary(turns))
        if a.rows:
            for x, y in zip(alone, turns):
                if x["mode"] == "threads" and x["cpus"] == 2:
                    print(f"    {x['workload']:12} {x['index']:7} alone {x['error'] * 100:+6.1f}%"
                          f"  turns {y['error'] * 100:+6.1f}%")
