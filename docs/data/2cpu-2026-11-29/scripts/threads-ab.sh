#!/bin/bash
# Threads-only validations of two builds, alternated: run from a directory
# holding them as vmbench-old and vmbench-new; the arguments are the round
# numbers (default 1 2 3). Writes val-{old,new}-ROUND/ and their logs.
cd "$(dirname "$0")" 2>/dev/null || true
rounds=("$@")
[ ${#rounds[@]} -eq 0 ] && rounds=(1 2 3)
for r in "${rounds[@]}"; do
  for v in old new; do
    ./vmbench-$v project --validate --workloads brk1,mmap1,malloc1,mmap2,page_fault3 \
      --mode threads --repeat 3 --out val-$v-$r > val-$v-$r.log 2>&1
  done
done
