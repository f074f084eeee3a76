#!/bin/sh
# Where a maple malloc1 call's time goes when two threads of one address
# space take turns call by call on their own CPUs, against two processes
# taking turns the same way (the baton and the model's globals alone).
# cpu-clock samples (this guest has no hardware counters), unrecorded
# calls only. Usage, from the repository root after
# `cargo build --release -p vmbench` and
# `cargo build --release -p vmlab --example holds_at_once`:
#   sh docs/data/2cpu-2026-11-29/turns-perf/perf-turns.sh OUTDIR [WORKLOAD INDEX]
# then `python3 docs/data/2cpu-2026-11-29/turns-perf/compare.py OUTDIR`.
set -e
out=$1; w=${2:-malloc1}; i=${3:-maple}
B=target/release/examples/holds_at_once
mkdir -p "$out"
target/release/vmbench topology --measure | grep ccx_ns > "$out/topology.txt"
for a in "turns" "turns processes"; do
  n=$(echo "$a" | tr ' ' _)
  perf record -q -F 20000 -e cpu-clock -o "$out/$n.data" \
    $B "$w" "$i" 2 300000 $a unrecorded > "$out/$n.txt" 2>&1
  perf report -i "$out/$n.data" --no-children --sort symbol --stdio -n 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | awk '{n=$2; $1=""; $2=""; $3=""; print n "\t" $0}' > "$out/$n.sym"
  rm -f "$out/$n.data"
done
