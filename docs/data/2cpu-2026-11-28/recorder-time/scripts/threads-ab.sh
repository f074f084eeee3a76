#!/bin/bash
# Alternated A/B of threads-only validations: old (2e2418e) and new (the count inside the recorder's time).
cd /tmp/ab
for i in 1 2 3; do
  for b in old new; do
    ./vmbench-$b topology --measure --out topo-$b-$i.json > topo-$b-$i.txt 2>&1
    ./vmbench-$b project --validate --workloads brk1,mmap1,malloc1,mmap2,page_fault3 --mode threads --repeat 3 --out val-$b-$i > val-$b-$i.log 2>&1
    echo "$b $i done $(date +%T)"
  done
done
