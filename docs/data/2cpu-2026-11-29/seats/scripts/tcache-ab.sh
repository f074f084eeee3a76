#!/bin/bash
# threads-only validations, glibc default vs tcache_count=2000, alternated
cd "$(dirname "$0")"
for r in 1 2 3; do
  for v in default big; do
    ./vmbench topology --measure 2>/dev/null | grep "one-way" | head -1 > topo-$v-$r.txt
    if [ $v = big ]; then export GLIBC_TUNABLES=glibc.malloc.tcache_count=2000; else unset GLIBC_TUNABLES; fi
    ./vmbench project --validate --workloads brk1,mmap1,malloc1,mmap2,page_fault3 --mode threads --repeat 3 --out val-$v-$r > val-$v-$r.log 2>&1
    unset GLIBC_TUNABLES
  done
done
