#!/usr/bin/env python3
"""Replays validation evidence with this checkout's simulation and prints,
per file and worker count, how many configurations are within +-15 % and
the median |error|, for all rows and for the threads-mode rows. Run from
the repository root after `cargo build --release -p vmbench` (VMBENCH=path
to use another build, e.g. one of the commit before, to compare):

    python3 docs/data/2cpu-2026-11-28/lock-keeping/scripts/compare.py [--rows] EVIDENCE.jsonl.gz...

With --rows, the signed error of every threads-mode row and every row
outside the bound.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

VMBENCH = os.environ.get("VMBENCH", "./target/release/vmbench")
rows_wanted = "--rows" in sys.argv
for evidence in [a for a in sys.argv[1:] if not a.startswith("--")]:
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run(
            [VMBENCH, "project", "--validate", "--replay", evidence, "--json", "--out", out],
            capture_output=True, text=True)  # non-zero when a row misses
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    cells = []
    for n in sorted({x["cpus"] for x in rows}):
        for label, keep in (("all", lambda x: True), ("threads", lambda x: x["mode"] == "threads")):
            rs = [x for x in rows if x["cpus"] == n and keep(x)]
            if rs:
                ok = sum(abs(x["error"]) <= 0.15 for x in rs)
                med = statistics.median(abs(x["error"]) for x in rs) * 100
                cells.append(f"{n}w {label} {ok}/{len(rs)} {med:.1f}%")
    print(f"{evidence}: " + " | ".join(cells))
    if rows_wanted:
        for x in rows:
            if x["mode"] == "threads" or abs(x["error"]) > 0.15:
                print(f"    {x['workload']:12} {x['config']:30} x{x['cpus']:<3} {x['error'] * 100:+7.1f}%")
