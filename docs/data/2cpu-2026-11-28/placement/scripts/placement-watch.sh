#!/bin/bash
# Correlates execl single's 2-worker rate with this guest's measured transfer and processes-mode brk1 scaling.
B=/work/main/target/release/vmbench
end=$(( $(date +%s) + ${SECS:-360} ))
rate() { python3 -c '
import sys,json
rows=[json.loads(l) for l in sys.stdin if l.startswith("{")]
print(" ".join(str(round(r.get("ops_per_sec") or r.get("value"))) for r in rows))'; }
while [ $(date +%s) -lt $end ]; do
  t=$($B topology --measure 2>&1 | grep ccx_ns | awk '{print $5}')
  e=$($B run --workloads execl --mode processes --index maple --imap single --threads 2 --repeat 1 --duration 1 --json 2>/dev/null | rate)
  b=$($B run --workloads brk1 --mode processes --index maple --threads 1,2 --repeat 1 --duration 0.5 --json 2>/dev/null | rate)
  t2=$($B topology --measure 2>&1 | grep ccx_ns | awk '{print $5}')
  echo "$(date +%T) transfer=$t/$t2 execl_single_2w=$e brk1_1w_2w=$b"
done
