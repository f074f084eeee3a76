#!/bin/bash
# /tmp/vmb-base: `vmbench` built at 00bb370; /tmp/vmb-new (ab2) the change, /tmp/vmb-hw (abw) its slab alone.
for r in 1 2; do for b in /tmp/vmb-base /tmp/vmb-hw; do
  $b run --workloads brk1,mmap1,malloc1,mmap2,page_fault3,kernbench,execl,aim7-brk --mode processes --index maple,legacy --threads 1,2 --repeat 1 --duration 2 --json 2>/dev/null | python3 -c '
import sys,json
rows=[json.loads(l) for l in sys.stdin if l.startswith("{")]
d={}
for x in rows: d[(x["op"],x["impl"],x["threads"])]=x["value"]
out=[]
for (op,impl,t),v in sorted(d.items()):
    if t==2 and (op,impl,1) in d: out.append(f"{op}/{impl} {v/d[(op,impl,1)]:.2f}x ({d[(op,impl,1)]:.0f})")
print(sys.argv[1], "; ".join(out))' $(basename $b)
done; done
