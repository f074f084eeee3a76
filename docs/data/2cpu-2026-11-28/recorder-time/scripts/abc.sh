#!/bin/bash
# Alternated A/B/C of validations of the five will-it-scale workloads, both modes:
# old = 2e2418e; new = the maple count inside the recorder's time; touch = new + clock-free touches.
cd /tmp/ab
for i in 1 2 3; do
  for b in old new touch; do
    ./vmbench-$b topology --measure --out ctopo-$b-$i.json > ctopo-$b-$i.txt 2>&1
    s=$(date +%s)
    ./vmbench-$b project --validate --workloads brk1,mmap1,malloc1,mmap2,page_fault3 --repeat 3 --out c-$b-$i > c-$b-$i.log 2>&1
    echo "$b $i done $(date +%T) $(( $(date +%s) - s )) s"
  done
done
