#!/bin/bash
# Alternated A/B: processes-mode will-it-scale rows, then execl, kernbench and aim7-brk (single, rwsem).
cd /tmp/ab
for i in 1 2; do
  for b in new old; do
    ./vmbench-$b topology --measure --out ptopo-$b-$i.json > ptopo-$b-$i.txt 2>&1
    s=$(date +%s)
    ./vmbench-$b project --validate --workloads brk1,mmap1,malloc1,mmap2,page_fault3 --mode processes --repeat 3 --out proc-$b-$i > proc-$b-$i.log 2>&1
    ./vmbench-$b project --validate --workloads execl,kernbench,aim7-brk --designs single --locks rwsem --repeat 3 --out big-$b-$i > big-$b-$i.log 2>&1
    echo "$b $i done $(date +%T) $(( $(date +%s) - s )) s"
  done
done
