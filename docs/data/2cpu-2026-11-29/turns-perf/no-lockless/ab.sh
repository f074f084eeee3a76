#!/bin/sh
# Two threads of one address space with and without the lockless fault
# path (VMSCALE_NO_LOCKLESS=1 with no-lockless.diff applied: the maple
# tree then never has a lockless reader, so it is never written in RCU
# mode, and every fault takes mmap_lock), unrecorded, 100000 operations
# a worker. Usage: sh ab.sh HOLDS_AT_ONCE_BINARY ROUNDS (from the
# repository root; the binary built with the diff applied).
B=$1
for r in $(seq "${2:-3}"); do
  echo "# round $r: $(target/release/vmbench topology --measure | awk '/ccx_ns/ {print $5, $6}') per transfer"
  for w in malloc1 mmap1; do
    for env in "" "VMSCALE_NO_LOCKLESS=1"; do
      line="$w maple ${env:-lockless}:"
      for t in 1 2; do
        line="$line $(env $env $B $w maple $t 100000 unrecorded | awk '/^unrecorded/ {print $2}')"
      done
      echo "$line"
    done
  done
  echo "malloc1 legacy: $($B malloc1 legacy 1 100000 unrecorded | awk '/^unrecorded/ {print $2}') $($B malloc1 legacy 2 100000 unrecorded | awk '/^unrecorded/ {print $2}')"
done
