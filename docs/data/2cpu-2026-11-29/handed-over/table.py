#!/usr/bin/env python3
"""The rows of `rows.jsonl` per round: each threads row's median error over
the nine evidence files and how many are within +-15 %, then per round
every row within (of 120), and maple malloc1 threads' predicted over
one-worker rate. Run from this directory: python3 table.py [ROWS.jsonl]"""
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1] if len(sys.argv) > 1 else "rows.jsonl")]
rounds = list(dict.fromkeys(r["round"] for r in rows))
keys = sorted({(r["workload"], r["mode"], r["index"]) for r in rows})
print(f"{'row':30}" + "".join(f"{t:>16}" for t in rounds))
for k in keys:
    if k[1] != "threads":
        continue
    cells = []
    for t in rounds:
        e = [r["error"] for r in rows if r["round"] == t and (r["workload"], r["mode"], r["index"]) == k]
        w = sum(abs(x) <= 0.15 for x in e)
        cells.append(f"{st.median(e) * 100:+7.1f}% {w}/{len(e)}  ")
    print(f"{' '.join(k):30}" + "".join(cells))
for t in rounds:
    e = [r for r in rows if r["round"] == t]
    m = [r["predicted"] / r["one_worker"] for r in e
         if (r["workload"], r["mode"], r["index"]) == ("malloc1", "threads", "maple")]
    print(f"{t}: {sum(abs(r['error']) <= 0.15 for r in e)} of {len(e)} within; "
          f"maple malloc1 threads predicted/one worker, median {st.median(m):.3f}")
