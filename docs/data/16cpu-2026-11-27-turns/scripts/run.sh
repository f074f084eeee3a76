#!/bin/bash
# Threads-mode profiles recorded with the two workers taking turns
# (Profile::interleaved, 682ca88): every suite configuration predicted at
# 2..N workers on this machine and run. The evidence keeps both profiles,
# so replaying it with `interleaved` removed gives the previous method's
# predictions against the same measurements. Output under $OUT.
B=.devbin/vmbench
N=$(nproc)
{
  date -u; uname -a; nproc; lscpu; cat /sys/fs/cgroup/cpu.max 2>/dev/null
  $B topology
  $B topology --measure --out $OUT/machine.json
} > $OUT/host.txt 2>&1
echo "host: $(grep -m1 'Model name' $OUT/host.txt), $N CPUs"
SECONDS=0
$B project --validate --machine $OUT/machine.json --cpus 2,4,8,$N --repeat 3 \
  --duration 0.25 --warmup 0.05 --json --out /tmp/val > $OUT/rows.jsonl 2> $OUT/validate.err
echo "validate rc=$? in ${SECONDS}s, $(wc -l < $OUT/rows.jsonl) rows"
cp /tmp/val/validation.md /tmp/val/evidence.jsonl.gz $OUT/ 2>/dev/null
python3 - "$OUT/rows.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    print(f"{r['workload']:12} {r['config']:32} x{r['cpus']:<3} 1w {r['one_worker']:12.0f} pred {r['predicted']:12.0f} meas {r['measured']:12.0f} {r['error']*100:+7.1f}%")
PY
