#!/usr/bin/env python3
"""Compare builds of vmbench by issue 11's `vmbench tree` ratios.

Each round runs `vmbench tree` once per build, in turn, so a slow spell of
a shared machine falls on all of them; each ratio's numerator and
denominator come from the same run. Prints, per ratio, size and build, the
median over the rounds and its range:

* a reader beside a writer against a reader alone with its own pin
  (`load_with_writer` of maple-shared / `load_pin` of maple);
* inserts and erases in random order against `BTreeMap`, for the tree
  written exclusively (maple) and shared (maple-shared).

    python3 scripts/ab_tree.py /tmp/vmbench-before,target/release/vmbench \\
        --rounds 7 --sizes 1e3,1e5 [--keep DIR]

With `--keep`, each run's JSON lines are written to DIR/BUILD-ROUND.jsonl
(BUILD being the build's position in the list, from 1).
"""
import argparse
import json
import os
import subprocess

from ab_ratio import cells


def ratios(lines):
    """The ratios of one run, keyed by (name, n)."""
    v = {}
    for line in lines:
        o = json.loads(line)
        v[(o["impl"], o["op"], o["n"])] = o["value"]
    out = {}
    for n in sorted({k[2] for k in v}):
        out[("load_with_writer / load_pin", n)] = (
            v[("maple-shared", "load_with_writer", n)] / v[("maple", "load_pin", n)])
        for op in ("insert_rand", "erase_rand"):
            for imp, name in (("maple", "exclusive"), ("maple-shared", "shared")):
                out[(f"{name} {op} / btreemap", n)] = v[(imp, op, n)] / v[("btreemap", op, n)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("builds", help="vmbench binaries, comma separated")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="1e3,1e5")
    ap.add_argument("--keep", help="directory for each run's JSON lines")
    args = ap.parse_args()
    builds = args.builds.split(",")
    seen = {b: {} for b in builds}
    for r in range(1, args.rounds + 1):
        for i, b in enumerate(builds, 1):
            out = subprocess.run(
                [b, "tree", "--sizes", args.sizes,
                 "--ops", "load_pin,load_with_writer,insert_rand,erase_rand",
                 "--impls", "maple,maple-shared,btreemap", "--json"],
                capture_output=True, text=True, check=True).stdout
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                with open(os.path.join(args.keep, f"{i}-{r}.jsonl"), "w") as f:
                    f.write(out)
            for key, x in ratios(out.splitlines()).items():
                seen[b].setdefault(key, []).append(x)
    for key in sorted(seen[builds[0]]):
        print(f"{key[0]:32} n={key[1]:<7} " + cells(builds, seen, key, digits=2))


if __name__ == "__main__":
    main()
