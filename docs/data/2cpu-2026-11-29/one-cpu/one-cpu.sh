#!/bin/sh
# Two workers of a threads-mode workload taking turns call by call, three
# ways: one thread making both workers' calls (as the profile recorder
# does), two threads on one CPU, two threads on two CPUs; and a control,
# two processes' workers (address spaces of their own) taken by one
# thread. Prints each worker's mmap_lock time an operation (ns, recorded)
# and the rate without the recorder.
# Usage (from the repository root): sh one-cpu.sh HOLDS_AT_ONCE_BINARY WORKLOAD ROUNDS [INDEXES]
B=$1; W=${2:-malloc1}
for r in $(seq "${3:-3}"); do
  echo "# round $r, $(date -u +%H:%M:%S) UTC"
  for idx in ${4:-maple legacy}; do
    for v in "one-thread" "one-cpu" "" "one-thread processes"; do
      out=$($B "$W" "$idx" 2 30000 turns $v 2>&1)
      held=$(echo "$out" | awk '/mmap_lock held/ {for (i = 1; i <= NF; i++) if ($i == "held") printf "%s ", $(i + 1)}')
      rate=$(echo "$out" | awk '/^unrecorded/ {print $2}')
      echo "$W $idx ${v:-two-cpu}: mmap_lock ns an operation, per worker: $held; unrecorded $rate ops/s"
    done
  done
done
