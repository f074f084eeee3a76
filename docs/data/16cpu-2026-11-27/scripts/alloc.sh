#!/bin/bash
# glibc's arenas at 16 workers: default against a large trim threshold and
# top pad (no heap shrinking, growth in 64 MiB steps), runs interleaved.
export LD_LIBRARY_PATH=$PWD/.devbin/lib
B=.devbin/vmbench; N=$(nproc)
T="glibc.malloc.trim_threshold=1073741824:glibc.malloc.top_pad=67108864"
for round in 1 2 3; do
  for env in default tuned; do
    if [ $env = tuned ]; then export GLIBC_TUNABLES=$T; else unset GLIBC_TUNABLES; fi
    $B run --workloads aim7-brk,kernbench,mmap1,page_fault3,brk1,malloc1 --mode processes --index maple,legacy --threads 1,$N --duration 0.3 --warmup 0.05 --json 2>/dev/null | sed "s/^{/{\"alloc\":\"$env\",\"round\":$round,/" >> $OUT/alloc.jsonl
  done
done
export GLIBC_TUNABLES=$T
.devbin/perf record -q -F 499 -o /tmp/t.data $B run --workloads aim7-brk --index maple --mode processes --threads $N --duration 1.5 --warmup 0.2 > /tmp/t.run 2>&1
{ grep processes /tmp/t.run | tail -1; .devbin/perf report -i /tmp/t.data --no-children --sort sym --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -30; } > $OUT/perf-tuned.txt
python3 - $OUT/alloc.jsonl <<'PY'
import json, sys, statistics as st
d = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    d.setdefault((r['op'], r['impl'], r['alloc'], r['threads']), []).append(r['value'])
for (op, impl, alloc, t), v in sorted(d.items()):
    if t == 1: continue
    one = st.median(d[(op, impl, alloc, 1)]); many = st.median(v)
    print(f"{op:12} {impl:7} {alloc:8} 1w {one:12.0f} {t}w {many:12.0f} x{many/one:6.2f}  runs {sorted(round(x) for x in v)}")
PY
