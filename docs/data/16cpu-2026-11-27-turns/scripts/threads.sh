#!/bin/bash
# Right after run.sh, on the same lease: the threads-mode rows twice more,
# with the build of run.sh (86c4567). (As run, the command line began with
# a stray `project --validate --machine /dev/null`, which failed at once
# and wrote nothing; dropped here.) Output under $OUT.
B=.devbin/vmbench
N=$(nproc)
SECONDS=0
$B topology --measure --out $OUT/machine.json > /dev/null 2>&1
for i in 1 2; do
  $B project --validate --workloads brk1,mmap1,malloc1,mmap2,page_fault3 --mode threads \
    --machine $OUT/machine.json --cpus 2,4,8,$N --repeat 3 --duration 0.25 --warmup 0.05 \
    --json --out /tmp/t$i > $OUT/threads-$i.jsonl 2> $OUT/threads-$i.err
  cp /tmp/t$i/evidence.jsonl.gz $OUT/threads-$i-evidence.jsonl.gz
  echo "run $i done at ${SECONDS}s"
done
