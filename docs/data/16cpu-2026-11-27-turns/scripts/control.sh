#!/bin/bash
# The threads-mode rows again, three times, with the interleaved profile
# calibrated against the control of two address spaces taking turns
# (`turns_apart`). The build printed each configuration's rates on stderr
# (lines starting TMP: one worker, the threads' turns, the control's
# turns), a line removed before it was committed; its recorded turns also
# announced their quiescent state (every 1024 rounds, more than a
# recording makes) inside worker 1's turn, not between turns as
# committed. Ran on a second lease, a fresh machine. Output under $OUT.
B=.devbin/vmbench
N=$(nproc)
$B topology --measure --out $OUT/machine-control.json > /dev/null 2>&1
SECONDS=0
for i in 1 2 3; do
  $B project --validate --workloads brk1,mmap1,malloc1,mmap2,page_fault3 --mode threads \
    --machine $OUT/machine-control.json --cpus 2,4,8,$N --repeat 3 --duration 0.25 --warmup 0.05 \
    --json --out /tmp/c$i > $OUT/control-$i.jsonl 2> $OUT/control-$i.err
  cp /tmp/c$i/evidence.jsonl.gz $OUT/control-$i-evidence.jsonl.gz
  echo "run $i done at ${SECONDS}s"
done
grep -h TMP $OUT/control-*.err
