#!/usr/bin/env python3
"""Validation evidence replayed as recorded and with the chain counts
removed (the pricing before lines reached through a pointer were counted
apart), against the same measurements: per worker count, how many
configurations are within +-15 % and the median |error|, for all rows and
for the threads-mode rows. Run from the repository root after
`cargo build --release -p vmbench`:

    python3 docs/data/16cpu-2026-11-27-chain/scripts/compare.py EVIDENCE.jsonl.gz...

With --rows, every configuration's signed errors too.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
VMBENCH = "./target/release/vmbench"


def replay(evidence, out):
    r = subprocess.run(
        [VMBENCH, "project", "--validate", "--replay", evidence, "--json", "--out", out],
        capture_output=True, text=True)
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def summary(rows):
    cells = []
    for n in sorted({r["cpus"] for r in rows}):
        for label, keep in (("all", lambda r: True), ("threads", lambda r: r["mode"] == "threads")):
            rs = [r for r in rows if r["cpus"] == n and keep(r)]
            if not rs:
                continue
            ok = sum(abs(r["error"]) <= 0.15 for r in rs)
            med = statistics.median(abs(r["error"]) for r in rs) * 100
            cells.append(f"{n}w {label} {ok}/{len(rs)} med {med:.1f}%")
    return " | ".join(cells)


args = [a for a in sys.argv[1:] if a != "--rows"]
for evidence in args:
    with tempfile.TemporaryDirectory() as tmp:
        stripped = os.path.join(tmp, "nochain.jsonl.gz")
        subprocess.run([sys.executable, os.path.join(HERE, "nochain.py"), evidence, stripped], check=True)
        chain = replay(evidence, os.path.join(tmp, "chain"))
        before = replay(stripped, os.path.join(tmp, "before"))
    print(evidence)
    print("  chain:  " + summary(chain))
    print("  before: " + summary(before))
    if "--rows" in sys.argv:
        old = {(r["workload"], r["config"], r["cpus"]): r for r in before}
        for r in chain:
            b = old[(r["workload"], r["config"], r["cpus"])]
            print(f"  {r['workload']:12} {r['config']:32} x{r['cpus']:<3} "
                  f"chain {r['error'] * 100:+7.1f}%  before {b['error'] * 100:+7.1f}%")
