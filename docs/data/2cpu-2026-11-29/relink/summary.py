#!/usr/bin/env python3
"""Summarises ab.jsonl.gz: per workload, index and worker count, the
median over the rounds of each build and of new / base within a round."""
import gzip, json, collections, statistics as s, sys, os
path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "ab.jsonl.gz")
d = collections.defaultdict(lambda: collections.defaultdict(dict))
for line in gzip.open(path, "rt"):
    r = json.loads(line)
    d[(r["op"], r["impl"], r["threads"])][r["build"]][r["round"]] = r["value"]
for k, v in sorted(d.items()):
    b, n = v["base"], v["new3"]
    ratios = [n[i] / b[i] for i in sorted(b) if i in n]
    print(f"{k[0]:9} {k[1]:6} x{k[2]}: base {s.median(b.values()):7.0f} "
          f"[{min(b.values()):.0f}-{max(b.values()):.0f}]  new {s.median(n.values()):7.0f} "
          f"[{min(n.values()):.0f}-{max(n.values()):.0f}]  new/base per round: median "
          f"{s.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]")
