#!/usr/bin/env python3
"""What the threads rows of a validation would be if, in the interleaved
(turn-taking) operations, every stretch of the thread's own code between a
release of `mmap_lock` and its next acquisition (in the same operation)
lasted at least G ns. Replays each evidence file (`vmbench project
--replay`) with its profiles so changed; nothing runs on the lab.

Usage, from the repository root:
  B=target/release/vmbench python3 gaps.py ROWS G,G,... EVIDENCE...
ROWS: `malloc1-maple` (that row's profile only: its error and its
predicted / measured mmap_lock contention, %) or `threads` (every
threads-mode profile: rows within +-15 %, and each row's median error)."""
import gzip, json, os, statistics, subprocess, sys, tempfile

B = os.environ.get("B", "target/release/vmbench")
ROWS, GS, EVIDENCE = sys.argv[1], [float(g) for g in sys.argv[2].split(",")], sys.argv[3:]


def stretch(profile, g):
    il = profile.get("interleaved")
    mm = [i for i, l in enumerate(profile["locks"]) if l["class"] == "mmap_lock"]
    if not il or not mm or g <= 0:
        return
    mm = mm[0]
    for op in il["ops"]:
        released, runs = False, []
        for s in op:
            if s["step"] == "release" and s["lock"] == mm:
                released, runs = True, []
            elif s["step"] == "run" and released:
                runs.append(s)
            elif s["step"] == "acquire" and s["lock"] == mm and released:
                total = sum(r["ns"] for r in runs)
                if total < g:
                    if runs:
                        runs[-1]["ns"] += g - total
                released = False


def chosen(p):
    if ROWS == "threads":
        return p["mode"] == "threads"
    return (p["mode"], p["workload"], p["index"]) == ("threads", "malloc1", "maple")


def replay(ev, g):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "evidence.jsonl.gz")
        with gzip.open(ev, "rt") as f, gzip.open(out, "wt") as w:
            for line in f:
                o = json.loads(line)
                if chosen(o["profile"]):
                    stretch(o["profile"], g)
                w.write(json.dumps(o) + "\n")
        r = subprocess.run([B, "project", "--replay", out, "--json", "--out", d + "/o"],
                           capture_output=True, text=True)
    return [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]


per_row, totals = {}, {g: [0, 0] for g in GS}
for ev in EVIDENCE:
    cells = []
    for g in GS:
        rows = [x for x in replay(ev, g) if x["mode"] == "threads"]
        if ROWS == "threads":
            within = sum(abs(x["error"]) <= 0.15 for x in rows)
            totals[g][0] += within
            totals[g][1] += len(rows)
            for x in rows:
                per_row.setdefault((x["workload"], x["config"], g), []).append(x["error"])
            cells.append(f"G={g:.0f}: {within}/{len(rows)}")
        else:
            x = next(x for x in rows if (x["workload"], x["config"]) == ("malloc1", "maple threads"))
            c = {cc["class"]: cc for cc in x.get("contended", [])}.get("mmap_lock", {})
            cells.append(f"G={g:.0f}: {x['error'] * 100:+4.0f} % ({c.get('predicted', 0) * 100:.0f}/{c.get('measured', 0) * 100:.0f})")
    print(os.path.relpath(os.path.dirname(ev)).split("docs/data/")[-1].ljust(34), " | ".join(cells), flush=True)
if ROWS == "threads":
    print("within +-15 %:", ", ".join(f"G={g:.0f}: {a} of {b}" for g, (a, b) in totals.items()))
    for w, c in sorted({(w, c) for w, c, _ in per_row}):
        def cell(g):
            e = [x * 100 for x in per_row[(w, c, g)]]
            return f"G={g:.0f}: {statistics.median(e):+4.0f} {sum(abs(x) <= 15 for x in e)}/{len(e)}"
        print(f"{w:11} {c:15}", " | ".join(cell(g) for g in GS))
