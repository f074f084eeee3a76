#!/bin/sh
# maple's malloc1, threads mode, one and two workers at once (`vmbench
# run`, 2 s each, unpinned placement), alternating main's build with the
# build of ../turns-perf/no-lockless/no-lockless.diff run with
# VMSCALE_NO_LOCKLESS=1 (no lockless fault path: the tree is never in RCU
# mode). atonce.py prints, per run, mmap_lock's acquisitions and waits
# (lockstat) and the workers' CPU time an operation outside those waits.
# Usage (from the repository root): sh at-once.sh MAIN_VMBENCH NO_LOCKLESS_VMBENCH ROUNDS
D=docs/data/2cpu-2026-11-29/one-cpu
for r in $(seq "${3:-3}"); do
  $1 run --workloads malloc1 --mode threads --index maple --threads 1,2 --json --placement any 2>/dev/null | python3 $D/atonce.py main
  VMSCALE_NO_LOCKLESS=1 $2 run --workloads malloc1 --mode threads --index maple --threads 1,2 --json --placement any 2>/dev/null | python3 $D/atonce.py no-lockless
done
