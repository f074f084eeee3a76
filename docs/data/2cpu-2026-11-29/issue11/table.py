#!/usr/bin/env python3
"""Issue 11's ratios from one `vmbench run --json` file: maple over legacy
at one worker, and two workers over one for each index (median runs)."""
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
d = {(r["op"], r["mode"], r["impl"], r["threads"]): r for r in rows}
print(f"{'workload':12} {'mode':9} {'maple/legacy x1':>15} {'maple x2/x1':>11} {'legacy x2/x1':>12}  transfer ns (maple, legacy)")
for op in ["brk1", "mmap1", "mmap2", "malloc1", "page_fault3", "kernbench", "execl"]:
    for mode in ["processes", "threads"]:
        if (op, mode, "maple", 1) not in d:
            continue
        m1, m2, l1, l2 = (d[(op, mode, i, t)]["value"] for i in ("maple", "legacy") for t in (1, 2))
        tm, tl = (d[(op, mode, i, 2)].get("transfer_ns", 0) for i in ("maple", "legacy"))
        print(f"{op:12} {mode:9} {m1 / l1:15.2f} {m2 / m1:11.2f} {l2 / l1:12.2f}  {tm:.0f}, {tl:.0f}")
