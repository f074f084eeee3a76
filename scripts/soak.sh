#!/usr/bin/env bash
# Soak: the tree's, the model's and the reverse maps' randomized stress
# tests, each with its invariant checks after every step, for a given time;
# then the number of checked operations each made, and their sum.
#
#   scripts/soak.sh [SECONDS]     # default 600; split between the tests
#
# Checked operations, as each test counts them:
#   tree (maple/tests/stress.rs): writer steps (each checked against an
#     oracle, the tree validated) plus reader lookups (each checked against
#     the writer's history);
#   model (mm/tests/stress.rs): writer steps (the map validated after each)
#     plus lockless faults (each checked against the page's state);
#   reverse maps (mm/tests/imap_stress.rs): steps (the whole reverse map
#     checked against every live address space after each round). Its
#     walker's concurrent overlap queries check only that what they return
#     overlaps, not that nothing is missing: they are reported, not counted.
# Any failure stops the soak with a non-zero status.
set -euo pipefail
cd "$(dirname "$0")/.."
total=${1:-600}
# The model's stress test checks by far the most per second (millions of
# faults against thousands of tree steps): it gets four fifths.
model=$((total * 4 / 5))
tree=$((total / 10))
imap_secs=$((total - model - tree))
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
start=$(date +%s)

echo "soak: building"
cargo test --release -p vmscale-maple --test stress --no-run -q 2>/dev/null
cargo test --release -p mm --test stress --test imap_stress --no-run -q 2>/dev/null

echo "soak: tree, ${tree}s"
# Two tests (two seeds) share the time.
MAPLE_STRESS_SECS=$((tree / 2)) cargo test --release -q -p vmscale-maple --test stress -- --nocapture \
    >"$log/tree" 2>&1 || { cat "$log/tree"; exit 1; }
echo "soak: model, ${model}s"
# Its two tests (maple and legacy indexes) run side by side.
MM_STRESS_SECS=$model cargo test --release -q -p mm --test stress -- --nocapture \
    >"$log/model" 2>&1 || { cat "$log/model"; exit 1; }
echo "soak: reverse maps, about ${imap_secs}s"
# Rounds per configuration, from a short calibration run of 100.
t0=$(date +%s.%N)
MM_IMAP_STRESS_STEPS=100 cargo test --release -q -p mm --test imap_stress -- --nocapture \
    >"$log/imap0" 2>&1 || { cat "$log/imap0"; exit 1; }
t1=$(date +%s.%N)
steps=$(python3 -c "print(max(100, int(100 * $imap_secs / max(0.1, $t1 - $t0))))")
MM_IMAP_STRESS_STEPS=$steps cargo test --release -q -p mm --test imap_stress -- --nocapture \
    >"$log/imap" 2>&1 || { cat "$log/imap"; exit 1; }

python3 - "$log" "$(( $(date +%s) - start ))" <<'PY'
import re, sys
log, secs = sys.argv[1], int(sys.argv[2])
def text(name): return open(f"{log}/{name}").read()
tree = sum(int(w) + sum(int(x) for x in re.findall(r"\d+", r))
           for w, r in re.findall(r"writer steps (\d+), reader ops \[([^\]]*)\]", text("tree")))
model = sum(int(s) + int(f) for s, f in re.findall(r"(\d+) writer steps, (\d+) checked faults", text("model")))
pairs = [(int(s), int(q)) for n in ("imap0", "imap")
         for s, q in re.findall(r"(\d+) checked steps, (\d+) checked queries", text(n))]
imap = sum(s for s, _ in pairs)
print(f"soak: reverse maps: {sum(q for _, q in pairs)} walker queries beside the steps (not counted)")
for name, n in (("tree", tree), ("model", model), ("reverse maps", imap)):
    if n == 0:
        sys.exit(f"soak: the {name} stress test reported no checked operation")
    print(f"soak: {name}: {n} checked operations")
print(f"soak: {tree + model + imap} checked operations in {secs} s, 0 failures")
PY
