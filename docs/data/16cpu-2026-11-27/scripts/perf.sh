#!/bin/bash
# Where maple's processes-mode fork/exec workloads spend their time at N
# workers, against legacy's and against one worker.
export LD_LIBRARY_PATH=$PWD/.devbin/lib
P=.devbin/perf; B=.devbin/vmbench; N=$(nproc)
$P --version
for cfg in "kernbench maple $N" "kernbench legacy $N" "aim7-brk maple $N" "aim7-brk legacy $N" "kernbench maple 1"; do
  set -- $cfg
  f=/tmp/p-$1-$2-$3
  $P record -q -F 499 -o $f.data $B run --workloads $1 --index $2 --mode processes --threads $3 --duration 1.5 --warmup 0.2 > $f.run 2>&1
  { echo "== $1 $2 x$3"; grep -h "processes" $f.run | tail -1
    $P report -i $f.data --no-children --sort sym --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -45; } >> $OUT/perf.txt
done
$P record -q -F 499 -g -o /tmp/g.data $B run --workloads aim7-brk --index maple --mode processes --threads $N --duration 1 --warmup 0.2 > /dev/null 2>&1
$P report -i /tmp/g.data --no-children --sort sym --stdio -G 2>/dev/null | grep -v '^$' | head -300 > $OUT/perf-callers.txt
ls -la $OUT
