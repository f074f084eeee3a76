#!/bin/bash
# Lines reached through a pointer priced apart (`Machine::chain`, the
# profile's `chain` counts): what `topology --measure` gives for `chain` on
# this machine (three times), then every configuration predicted at
# 2..N workers and run, then the threads rows once more. Each run's
# evidence keeps the chain counts; scripts/nochain.py removes them, so a
# replay gives the previous pricing against the same measurements.
# Output under $OUT.
B=.devbin/vmbench
N=$(nproc)
{
  date -u; uname -a; nproc; lscpu; cat /sys/fs/cgroup/cpu.max 2>/dev/null
  for i in 1 2 3; do $B topology --measure; done
  $B topology --measure --out $OUT/machine.json
} > $OUT/host.txt 2>&1
echo "host: $(grep -m1 'Model name' $OUT/host.txt), $N CPUs"
grep -E "ccx_ns|\(overlap\)|\(chain\)" $OUT/host.txt
SECONDS=0
$B project --validate --machine $OUT/machine.json --cpus 2,4,8,$N --repeat 3 \
  --duration 0.25 --warmup 0.05 --json --out /tmp/val > $OUT/rows.jsonl 2> $OUT/validate.err
echo "validate rc=$? in ${SECONDS}s, $(wc -l < $OUT/rows.jsonl) rows"
cp /tmp/val/validation.md $OUT/
cp /tmp/val/evidence.jsonl.gz $OUT/evidence.jsonl.gz
tail -1 $OUT/validate.err
$B project --validate --workloads brk1,mmap1,malloc1,mmap2,page_fault3 --mode threads \
  --machine $OUT/machine.json --cpus 2,4,8,$N --repeat 3 --duration 0.25 --warmup 0.05 \
  --json --out /tmp/t1 > $OUT/threads.jsonl 2> $OUT/threads.err
cp /tmp/t1/evidence.jsonl.gz $OUT/threads-evidence.jsonl.gz
echo "threads done at ${SECONDS}s"; tail -1 $OUT/threads.err
