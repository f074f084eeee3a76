#!/bin/bash
# usage: replay-at.sh NS EVIDENCE.jsonl.gz OUTDIR
# Sets the transfer time of every machine description in an evidence file's
# execl points to NS nanoseconds and predicts them again (vmbench project --replay).
ns=$1; ev=$2; out=$3
mkdir -p "$out"
zcat "$ev" | python3 -c '
import sys,json
ns=float(sys.argv[1])
for l in sys.stdin:
    d=json.loads(l)
    if d["profile"]["workload"]!="execl": continue
    for p in d["points"]:
        for m in p["machines"]:
            m["ccx_ns"]=ns; m["node_ns"]=ns; m["remote_ns"]=[[ns]]
    print(json.dumps(d))
' "$ns" | gzip > "$out/evidence.jsonl.gz"
./target/release/vmbench project --replay "$out" --out "$out/out"
