#!/bin/bash
# usage: abx.sh rounds bin...   (execl maple processes, imap single, 1 and 2 workers)
rounds=$1; shift
for r in $(seq $rounds); do for b in "$@"; do echo -n "$b "; /tmp/$b run --workloads execl --mode processes --index maple --threads 1,2 --repeat 1 --duration ${DUR:-1.5} --json ${EXTRA} 2>/dev/null | python3 -c '
import sys,json
rows=[json.loads(l) for l in sys.stdin if l.startswith("{")]
v={r.get("threads"):(r.get("ops_per_sec") or r.get("value")) for r in rows}
print(round(v[1]), round(v[2]), round(v[2]/v[1],2))'; done; done
