#!/bin/bash
# This machine's own kernel (tools/kernel-ref/wis.c) against the lab on the
# same three workloads, 1 to N threads, runs in turn.
N=$(nproc); B=.devbin/vmbench
uname -r > $OUT/kernel-vs-lab.txt
for w in brk1 mmap1 malloc1; do
  for t in 1 2 4 8 $N; do .devbin/wis $w $t threads >> $OUT/kernel-vs-lab.txt; done
  for t in 1 $N; do .devbin/wis $w $t processes >> $OUT/kernel-vs-lab.txt; done
done
$B run --workloads brk1,mmap1,malloc1 --index maple,legacy --mode threads --threads 1,2,4,8,$N --duration 0.5 --warmup 0.1 --json > $OUT/lab-threads.jsonl 2>/dev/null
cat $OUT/kernel-vs-lab.txt
python3 - $OUT/lab-threads.jsonl <<'PY'
import json, sys
d = {}
for l in open(sys.argv[1]):
    r = json.loads(l); d[(r['op'], r['impl'], r['threads'])] = r['value']
for (op, impl, t), v in sorted(d.items()):
    print(f"lab {op:8} {impl:7} x{t:<3} {v:12.0f} {v/d[(op, impl, 1)]:5.2f}x")
PY
