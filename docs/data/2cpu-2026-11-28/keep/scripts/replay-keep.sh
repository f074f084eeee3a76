#!/bin/bash
# Replays every validation evidence file under docs/data with machine
# descriptions whose `keep` is each of the values given (0 is the rule
# before), and prints compare.py's summary per file and value, and the
# signed error of legacy's page_fault3 in threads mode. From the
# repository root, after `cargo build --release -p vmbench`:
#
#     bash docs/data/2cpu-2026-11-28/keep/scripts/replay-keep.sh 0 0.35 0.4 0.5
set -e
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ev in $(find docs/data -name 'evidence*.jsonl.gz' | sort); do
    for k in "$@"; do
        python3 "$here/with-keep.py" "$k" "$ev" "$tmp/e.jsonl.gz"
        out=$(python3 docs/data/2cpu-2026-11-28/lock-keeping/scripts/compare.py --rows "$tmp/e.jsonl.gz")
        sum=$(echo "$out" | head -1 | sed 's/^[^:]*: //')
        pf3=$(echo "$out" | grep 'page_fault3  *legacy threads' | awk '{printf "%s%s ", $(NF-1), $NF}')
        echo "${ev#docs/data/} keep=$k: $sum; page_fault3 legacy threads $pf3"
    done
done
