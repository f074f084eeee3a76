#!/usr/bin/env python3
"""Compare builds of vmbench by the maple / legacy ratio at one worker.

Each round runs every build once, in turn, so a slow spell of a shared
machine falls on all of them; each run measures both indexes, so each
ratio's numerator and denominator come from the same minute. Prints, per
workload and build, the median ratio over the rounds and its range.

    python3 scripts/ab_ratio.py /tmp/vmbench-before,target/release/vmbench \\
        --workloads brk1,mmap1,mmap2,malloc1,page_fault3,execl,kernbench \\
        --rounds 3 --duration 0.5
"""
import argparse
import json
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("builds", help="vmbench binaries, comma separated")
    ap.add_argument("--workloads", default="brk1,mmap1,mmap2,malloc1,page_fault3,execl,kernbench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", default="0.5")
    args = ap.parse_args()
    builds = args.builds.split(",")
    ratios = {b: {} for b in builds}
    for _ in range(args.rounds):
        for b in builds:
            out = subprocess.run(
                [b, "run", "--workloads", args.workloads, "--mode", "processes",
                 "--threads", "1", "--index", "maple,legacy",
                 "--duration", args.duration, "--json"],
                capture_output=True, text=True, check=True).stdout
            rate = {}
            for line in out.splitlines():
                o = json.loads(line)
                rate[(o["op"], o["impl"])] = o["value"]
            for (op, index), v in rate.items():
                if index == "maple":
                    ratios[b].setdefault(op, []).append(v / rate[(op, "legacy")])
    for op in ratios[builds[0]]:
        print(f"{op:12} " + cells(builds, ratios, op, digits=3))


def cells(builds, samples, key, digits):
    """Each build's median of `samples[build][key]` and its range, on one line."""
    out = []
    for b in builds:
        x = samples[b][key]
        out.append(f"{b}: {statistics.median(x):.{digits}f} [{min(x):.2f}-{max(x):.2f}]")
    return "  ".join(out)


if __name__ == "__main__":
    main()
