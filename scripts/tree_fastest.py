#!/usr/bin/env python3
"""Which implementation is fastest per op and size in `vmbench tree --json` output.

    vmbench tree --json > tree.jsonl && python3 scripts/tree_fastest.py < tree.jsonl

Prints a Markdown table: per (op, n), the fastest implementation, the
runner-up, and runner-up / fastest. Lower is better for every figure of
`vmbench tree` (ns/op, ns/entry, bytes/entry). `maple-shared`'s reads are
maple's and `load_pin` exists only for maple, so rows with one
implementation show no runner-up. `bytes_asc` and `bytes_rand` count
maple's nodes only (not its values) against all of the other maps' memory,
so they are left out: `bytes_total_*` compare like with like.
"""
import json
import sys
from collections import OrderedDict

rows = OrderedDict()
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    f = json.loads(line)
    if f["op"] in ("bytes_asc", "bytes_rand"):
        continue
    rows.setdefault((f["op"], f["n"]), []).append((f["value"], f["impl"], f["unit"]))

print("| op | n | fastest | runner-up | runner-up / fastest |")
print("|---|---:|---|---|---:|")
for (op, n), figs in rows.items():
    figs.sort()
    (v0, i0, unit), rest = figs[0], figs[1:]
    if rest:
        v1, i1, _ = rest[0]
        print(f"| {op} | {n} | {i0} ({v0:.3g} {unit}) | {i1} ({v1:.3g}) | {v1 / v0:.2f}x |")
    else:
        print(f"| {op} | {n} | {i0} ({v0:.3g} {unit}) | - | - |")
