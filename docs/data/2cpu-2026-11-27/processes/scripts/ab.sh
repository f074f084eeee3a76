#!/bin/bash
# usage: ab.sh rounds workload index bin...
rounds=$1; w=$2; idx=$3; shift 3
for r in $(seq $rounds); do
  for b in "$@"; do
    out=$($b run --workloads $w --mode processes --index $idx --threads 1,2 --repeat 1 --duration ${DUR:-2} --json 2>/dev/null)
    echo "$out" | python3 -c '
import sys,json
rows=[json.loads(l) for l in sys.stdin if l.startswith("{")]
v={}
for r in rows:
    v[r.get("threads")]=r.get("ops_per_sec") or r.get("value") or r.get("throughput")
print(sys.argv[1], v.get(1), v.get(2), round(v[2]/v[1],3) if v.get(1) and v.get(2) else None)
' $(basename $b)
  done
done
