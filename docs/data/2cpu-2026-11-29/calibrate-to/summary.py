#!/usr/bin/env python3
"""Per validation directory: rows within +-15 %, median |error|, maple
malloc1 threads' error and transfer time, the median one-worker spread,
every row's error."""
import json, sys
for f in sys.argv[1:]:
    rows = [json.loads(l) for l in open(f + "/validation.jsonl")]
    ok = sum(abs(o["error"]) <= 0.15 for o in rows)
    med = sorted(abs(o["error"]) for o in rows)[len(rows) // 2]
    m = [o for o in rows if o["workload"] == "malloc1" and o["index"] == "maple"][0]
    sp = sorted(max(o["one_worker_runs"]) / min(o["one_worker_runs"]) - 1 for o in rows)[len(rows) // 2]
    print(f"{f}: {ok} of {len(rows)}, median |error| {med*100:.1f} %, malloc1 maple {m['error']*100:+.1f} % "
          f"at {sorted(m['transfer_ns'])[1]:.0f} ns, one-worker spread {sp*100:.0f} %; "
          + " ".join(f"{o['error']*100:+.0f}" for o in rows))
