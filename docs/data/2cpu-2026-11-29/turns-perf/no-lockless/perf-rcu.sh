#!/bin/sh
# Two threads of one address space taking turns, with the lockless fault
# path (so the maple tree is written in RCU mode) and without it
# (VMSCALE_NO_LOCKLESS=1, no-lockless.diff applied), profiled by
# function as ../perf-turns.sh does. Usage, from the repository root:
#   sh perf-rcu.sh HOLDS_AT_ONCE_BINARY OUT
# then `python3 ../compare.py OUT 3 lockless nolockless`.
set -e
B=$1; out=$2
mkdir -p "$out"
target/release/vmbench topology --measure | grep ccx_ns > "$out/topology.txt"
for n in lockless nolockless; do
  env=""; [ "$n" = nolockless ] && env="VMSCALE_NO_LOCKLESS=1"
  env $env perf record -q -F 20000 -e cpu-clock -o "$out/$n.data" \
    "$B" malloc1 maple 2 300000 turns unrecorded > "$out/$n.txt" 2>&1
  perf report -i "$out/$n.data" --no-children --sort symbol --stdio -n 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | awk '{n=$2; $1=""; $2=""; $3=""; print n "\t" $0}' > "$out/$n.sym"
  rm -f "$out/$n.data"
done
