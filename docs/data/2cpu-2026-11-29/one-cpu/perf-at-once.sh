#!/bin/sh
# perf (cpu-clock, 20 kHz, call graphs) of maple's two malloc1 threads at
# once, main's build and the no-lockless one (see at-once.sh); then
# `perf report --no-children --sort symbol --stdio` of each.
# Usage (from the repository root): sh perf-at-once.sh MAIN_VMBENCH NO_LOCKLESS_VMBENCH
D=docs/data/2cpu-2026-11-29/one-cpu
perf record -F 20000 -g -o /tmp/perf-main.data -- $1 run --workloads malloc1 --mode threads --index maple --threads 2 --placement any --json 2>/dev/null | python3 $D/atonce.py main
VMSCALE_NO_LOCKLESS=1 perf record -F 20000 -g -o /tmp/perf-nl.data -- $2 run --workloads malloc1 --mode threads --index maple --threads 2 --placement any --json 2>/dev/null | python3 $D/atonce.py no-lockless
for b in main nl; do
  echo "== $b"
  perf report -i /tmp/perf-$b.data --no-children --sort symbol --stdio 2>/dev/null | grep -E "^\s+[0-9]" | head -30
done
