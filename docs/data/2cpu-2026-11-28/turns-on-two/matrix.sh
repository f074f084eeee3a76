#!/bin/sh
# Two threads of one address space: at once, taking turns call by call on
# their own two CPUs, and (the baton's own cost) two processes taking
# turns; one thread for scale. Operations a second, unrecorded.
# Each round begins with the one-way transfer time between the two CPUs
# that `vmbench topology --measure` finds then: on this guest it is
# about 34 ns or about 103 ns, by where the host puts the vCPUs.
# Usage: sh matrix.sh ROUNDS (from the repository root, after
# `cargo build --release -p vmbench` and
# `cargo build --release -p vmlab --example holds_at_once`).
B=target/release/examples/holds_at_once
rounds=${1:-3}
echo "# round workload index: 1 thread | 2 at once | 2 taking turns | 2 processes taking turns (ops/s, 30000 ops each)"
for r in $(seq "$rounds"); do
  echo "# round $r: $(target/release/vmbench topology --measure | awk '/ccx_ns/ {print $5, $6}') per transfer"
  for w in brk1 mmap1 malloc1 mmap2; do
    for i in maple legacy; do
      line="$r $w $i:"
      for a in "1" "2" "2 turns" "2 turns processes"; do
        x=$($B $w $i $(echo $a | cut -d' ' -f1) 30000 $(echo $a | cut -s -d' ' -f2-) 2>&1 | awk '/^unrecorded/ {print $2}')
        line="$line $x"
      done
      echo "$line"
    done
  done
done
