#!/bin/bash
# The lab's threads mode after the two fixes of 2026-11-27 (no sleep in
# anon_vma_prepare, the rwsem's longer spin): this machine's own kernel
# (tools/kernel-ref/wis.c) and the lab, 1 to N threads, then every suite
# configuration predicted at 2..N workers and run. Output under $OUT.
B=.devbin/vmbench
N=$(nproc)
{
  date -u; uname -a; nproc; lscpu; cat /sys/fs/cgroup/cpu.max 2>/dev/null
  $B topology
  $B topology --measure --out $OUT/machine.json
} > $OUT/host.txt 2>&1
echo "host: $(grep -m1 'Model name' $OUT/host.txt), $N CPUs"
SECONDS=0
uname -r > $OUT/kernel-vs-lab.txt
for w in brk1 mmap1 malloc1; do
  for t in 1 2 4 8 $N; do .devbin/wis $w $t threads >> $OUT/kernel-vs-lab.txt; done
done
$B run --workloads brk1,mmap1,malloc1,mmap2,page_fault3 --index maple,legacy --mode threads \
  --threads 1,2,4,8,$N --duration 0.5 --warmup 0.1 --json > $OUT/lab-threads.jsonl 2>/dev/null
echo "kernel and lab threads in ${SECONDS}s"
cat $OUT/kernel-vs-lab.txt
python3 - $OUT/lab-threads.jsonl <<'PY'
import json, sys
d = {}
for l in open(sys.argv[1]):
    r = json.loads(l); d[(r['op'], r['impl'], r['threads'])] = (r['value'], r['cpu']['share'])
for (op, impl, t), (v, sh) in sorted(d.items()):
    print(f"lab {op:11} {impl:7} x{t:<3} {v:12.0f} {v/d[(op, impl, 1)][0]:5.2f}x  cpu {sh:.2f}")
PY
SECONDS=0
$B project --validate --machine $OUT/machine.json --cpus 2,4,8,$N --repeat 3 \
  --duration 0.25 --warmup 0.05 --json --out /tmp/val > $OUT/rows.jsonl 2> $OUT/validate.err
echo "validate rc=$? in ${SECONDS}s, $(wc -l < $OUT/rows.jsonl) rows"
cp /tmp/val/validation.md $OUT/ 2>/dev/null
# As run, this line read /tmp/val/evidence.jsonl, which does not exist
# (the validation writes it gzipped), so this run's evidence was lost:
cp /tmp/val/evidence.jsonl.gz $OUT/ 2>/dev/null
python3 - "$OUT/rows.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    print(f"{r['workload']:12} {r['config']:32} x{r['cpus']:<3} 1w {r['one_worker']:12.0f} pred {r['predicted']:12.0f} meas {r['measured']:12.0f} {r['error']*100:+7.1f}%")
PY
