#!/bin/bash
# A/B: the collector's drain (new) against one collection a flush (old),
# alternated; ops/s and the peak resident set of each run.
for round in 1 2 3; do
  for b in old new; do
    for w in malloc1; do
      for t in 1 2; do
        /usr/bin/time -f "%M" -o /tmp/ab-rss.txt /tmp/vmbench-$b run --workloads $w --index maple --mode threads --threads $t --duration 2 --warmup 0.5 > /tmp/ab-out.txt 2>&1
        ops=$(grep -o "x$t: [0-9]* ops/s" /tmp/ab-out.txt | awk '{print $2}')
        echo "round $round $b $w maple threads x$t: $ops ops/s, peak RSS $(cat /tmp/ab-rss.txt) kB"
      done
    done
  done
done
