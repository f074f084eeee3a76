#!/bin/bash
# threads-only validations: the build before (old) and the one whose
# interleaved rate follows the one-worker median (new), alternated
cd "$(dirname "$0")"
for r in 1 2 3; do
  for v in old new; do
    ./vmbench-$v project --validate --workloads brk1,mmap1,malloc1,mmap2,page_fault3 --mode threads --repeat 3 --out val-$v-$r > val-$v-$r.log 2>&1
  done
done
