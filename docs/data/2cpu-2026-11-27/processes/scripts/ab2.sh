#!/bin/bash
# /tmp/vmb-base: `vmbench` built at 00bb370; /tmp/vmb-new (ab2) the change, /tmp/vmb-hw (abw) its slab alone.
# interleaved A/B: rounds of base and new, execl and kernbench, both indexes, 1 and 2 workers
for r in $(seq ${ROUNDS:-6}); do
  t=$(/tmp/vmb-base topology --measure 2>&1 | grep -A2 pairs | tail -1 | awk '{print $3}')
  for b in vmb-base vmb-new; do
    /tmp/$b run --workloads execl,kernbench --mode processes --index maple,legacy --threads 1,2 --repeat 1 --duration 1.5 --warmup 0.3 --json 2>/dev/null | python3 -c '
import sys,json
d={}
for l in sys.stdin:
    x=json.loads(l); d[(x["op"],x["impl"],x["threads"])]=x["value"]
print(sys.argv[1], sys.argv[2], " ".join(f"{op}/{i}={d[(op,i,2)]/d[(op,i,1)]:.2f}({d[(op,i,1)]:.0f})" for (op,i,t) in sorted(d) if t==1))' $b "$t"
  done
done
