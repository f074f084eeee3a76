#!/usr/bin/env python3
"""What the threads rows of a validation would be if the recorder counted
K more lines in every write section of `mmap_lock` in the interleaved
(turn-taking) operations: all K written, all reached through a pointer.
Replays each evidence file (`vmbench project --validate --replay`) with
its profiles so changed; nothing runs on the lab.

With AFTER=1 the K lines come instead right after each such release, as
lines of `mmap_lock`'s data touched outside its hold (docs/projection.md,
"Two threads on one CPU, and two at once").

Usage, from the repository root:
  B=target/release/vmbench [AFTER=1] python3 sensitivity.py ROWS K,K,... EVIDENCE...
ROWS is `malloc1-maple` (change that row's profile only and print its
error and its predicted / measured mmap_lock contention, %) or `threads`
(change every threads-mode profile and print how many threads rows are
within +-15 %, then each row's median error and range over the files)."""
import gzip, json, os, statistics, subprocess, sys, tempfile

B = os.environ.get("B", "target/release/vmbench")
AFTER = os.environ.get("AFTER") == "1"
ROWS, KS, EVIDENCE = sys.argv[1], [int(k) for k in sys.argv[2].split(",")], sys.argv[3:]


def add_lines(profile, k):
    """K more written, chained lines before (with AFTER, after) each
    release of mmap_lock held for write, in the profile's interleaved
    operations."""
    il = profile.get("interleaved")
    mm = [i for i, l in enumerate(profile["locks"]) if l["class"] == "mmap_lock"]
    if not il or not mm:
        return
    mm = mm[0]
    for op in il["ops"]:
        held, last, j = False, None, 0
        while j < len(op):
            s = op[j]
            if s["step"] == "acquire" and s["lock"] == mm and s["write"]:
                held, last = True, None
            elif s["step"] == "lines" and s["lock"] == mm and held:
                last = j
            elif s["step"] == "release" and s["lock"] == mm and held:
                if AFTER:
                    if k:
                        op.insert(j + 1, {"step": "lines", "lock": mm, "read": 0, "written": k, "chain": k})
                        j += 1
                else:
                    if last is None:
                        op.insert(j, {"step": "lines", "lock": mm, "read": 0, "written": 0, "chain": 0})
                        last, j = j, j + 1
                    op[last]["written"] += k
                    op[last]["chain"] = op[last].get("chain", 0) + k
                held = False
            j += 1


def chosen(p):
    if ROWS == "threads":
        return p["mode"] == "threads"
    return (p["mode"], p["workload"], p["index"]) == ("threads", "malloc1", "maple")


def replay(ev, k):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "evidence.jsonl.gz")
        with gzip.open(ev, "rt") as f, gzip.open(out, "wt") as g:
            for line in f:
                o = json.loads(line)
                if chosen(o["profile"]):
                    add_lines(o["profile"], k)
                g.write(json.dumps(o) + "\n")
        r = subprocess.run([B, "project", "--validate", "--replay", out, "--json", "--out", d + "/o"],
                           capture_output=True, text=True)
    return [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]


per_row = {}
totals = {k: [0, 0] for k in KS}
for ev in EVIDENCE:
    cells = []
    for k in KS:
        rows = [x for x in replay(ev, k) if x["mode"] == "threads"]
        if ROWS == "threads":
            within = sum(abs(x["error"]) <= 0.15 for x in rows)
            totals[k][0] += within
            totals[k][1] += len(rows)
            for x in rows:
                per_row.setdefault((x["workload"], x["config"], k), []).append(x["error"])
            cells.append(f"K={k}: {within}/{len(rows)}")
        else:
            x = next(x for x in rows if (x["workload"], x["config"]) == ("malloc1", "maple threads"))
            c = {cc["class"]: cc for cc in x.get("contended", [])}.get("mmap_lock", {})
            cells.append(f"K={k}: {x['error'] * 100:+4.0f} % ({c.get('predicted', 0) * 100:.0f}/{c.get('measured', 0) * 100:.0f})")
    print(os.path.relpath(os.path.dirname(ev)).split("docs/data/")[-1].ljust(34), " | ".join(cells), flush=True)
if ROWS == "threads":
    print("within +-15 %:", ", ".join(f"K={k}: {a} of {b}" for k, (a, b) in totals.items()))
    for w, c in sorted({(w, c) for w, c, _ in per_row}):
        def cell(k):
            e = [x * 100 for x in per_row[(w, c, k)]]
            return f"K={k}: {statistics.median(e):+4.0f} [{min(e):+4.0f}, {max(e):+4.0f}] {sum(abs(x) <= 15 for x in e)}/{len(e)}"
        print(f"{w:11} {c:15}", " | ".join(cell(k) for k in KS))
