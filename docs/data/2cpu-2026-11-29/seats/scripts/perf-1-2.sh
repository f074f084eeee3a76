#!/bin/bash
# perf (cpu-clock) of maple malloc1 threads at 1 and 2 threads
B=${B:-./target/release/vmbench}  # from the repository root
W=${W:-malloc1}; I=${I:-maple}
for t in 1 2; do
  $B topology --measure 2>/dev/null | grep -i "transfer\|one-way" | head -2
  perf record -F 2999 -g -o /tmp/perf-$W-$I-$t.data -- $B run --workloads $W --mode threads --index $I --threads $t --duration 3 --warmup 0.3 --placement any --json > /tmp/run-$W-$I-$t.json 2>/dev/null
  python3 -c "import json;[print($t, o.get('ops_per_sec') or o) for o in map(json.loads, open('/tmp/run-$W-$I-$t.json'))]" | cut -c1-300
done
