#!/bin/sh
# Frees where they were retired: the build before (old) and after (home), in turn.
# Usage: sh ab.sh ROUNDS OUTDIR (VB_OLD, VB_HOME: the two vmbench binaries)
rounds=${1:-3}; out=${2:-.}
for r in $(seq "$rounds"); do
  for b in old home; do
    eval bin=\$VB_$(echo $b | tr a-z A-Z)
    echo "== round $r $b $(date +%T) $($bin topology --measure 2>/dev/null | awk '/ccx_ns/ {print $5, $6}')"
    $bin run --workloads malloc1,mmap1,page_fault3 --mode threads --index maple,legacy --threads 1,2 --duration 1 --repeat 3 --json > $out/$b-$r-threads.jsonl 2>/dev/null
    $bin run --workloads malloc1,execl,kernbench --mode processes --index maple --threads 1,2 --duration 1 --repeat 3 --json > $out/$b-$r-processes.jsonl 2>/dev/null
  done
done
