#!/usr/bin/env python3
"""Two workers' throughput over one worker's, by the transfer time measured
right before each run.

On the 2-vCPU guest the ping-pong between the two vCPUs measures about
15, 38 or 110-150 ns, by where the host runs them at the time. Validation
evidence keeps each run's measured transfer time (`transfer_ns`) beside its
rate (`measured_runs`), so the runs of every configuration can be grouped by
it:

    python3 states.py EVIDENCE.jsonl.gz...
"""
import collections
import gzip
import json
import statistics
import sys

BANDS = (("under 25 ns", 0, 25), ("25-60 ns", 25, 60), ("over 60 ns", 60, float("inf")))

runs = collections.defaultdict(lambda: collections.defaultdict(list))
for path in sys.argv[1:]:
    with gzip.open(path, "rt") as f:
        for line in f:
            for point in json.loads(line)["points"]:
                v = point["validation"]
                key = (v["workload"], v["config"], v["cpus"])
                for t, m in zip(v["transfer_ns"], v["measured_runs"]):
                    band = next(b for b, lo, hi in BANDS if lo <= t < hi)
                    runs[key][band].append(m / v["one_worker"])

print("| workload | configuration | workers | " + " | ".join(b for b, _, _ in BANDS) + " |")
print("|---|---|---:|" + "---:|" * len(BANDS))
for (w, c, n), bands in sorted(runs.items()):
    cells = []
    for b, _, _ in BANDS:
        r = bands.get(b, [])
        cells.append(f"{statistics.median(r):.2f}x ({len(r)})" if r else "-")
    print(f"| {w} | {c} | {n} | " + " | ".join(cells) + " |")
