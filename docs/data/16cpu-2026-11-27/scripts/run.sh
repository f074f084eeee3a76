#!/bin/bash
# The 16-core scaling check: this machine described, then every suite
# configuration predicted at 2..N workers from its one-worker profile and
# run for real. Output under $OUT (at most 8 files).
B=.devbin/vmbench
N=$(nproc)
{
  date -u; uname -a; nproc; lscpu; cat /sys/fs/cgroup/cpu.max 2>/dev/null
  $B topology
  $B topology --measure --out $OUT/machine.json
} > $OUT/host.txt 2>&1
echo "host: $(grep -m1 'Model name' $OUT/host.txt), $N CPUs"
cat $OUT/machine.json
CPUS=2,4,8,$N
[ "$N" -le 8 ] && CPUS=$N
SECONDS=0
$B project --validate --machine $OUT/machine.json --cpus $CPUS --repeat 3 \
  --duration 0.25 --warmup 0.05 $VALARGS --json --out /tmp/val > $OUT/rows.jsonl 2> $OUT/validate.err
echo "validate rc=$? in ${SECONDS}s, $(wc -l < $OUT/rows.jsonl) rows"
cp /tmp/val/validation.md $OUT/ 2>/dev/null
gzip -c /tmp/val/evidence.jsonl > $OUT/evidence.jsonl.gz 2>/dev/null
ls -la $OUT
python3 - "$OUT/rows.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    print(f"{r['workload']:12} {r['config']:32} x{r['cpus']:<3} 1w {r['one_worker']:12.0f} pred {r['predicted']:12.0f} meas {r['measured']:12.0f} {r['error']*100:+7.1f}%")
PY
