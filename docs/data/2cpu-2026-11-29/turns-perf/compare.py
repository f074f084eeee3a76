"""Per operation, by symbol: two threads taking turns against two
processes taking turns (perf-turns.sh's output). Every run makes, per
worker, 100000 warm-up calls and then 300000 operations of three calls
each (malloc1: mmap, write fault, munmap); samples are at 20 kHz. The
baton's spin is inlined into the example's worker closure and left out
of the totals.
Usage: compare.py FOLDER [CALLS_PER_OP [RUN_A RUN_B]]: 2 calls an
operation for mmap1; RUN_A and RUN_B name two other runs of the folder
(`RUN.sym`, `RUN.txt`), as no-lockless/perf-rcu.sh writes them."""
import sys

CALLS_PER_OP = int(sys.argv[2]) if len(sys.argv) > 2 else 3
OPS = 2 * (100_000 / CALLS_PER_OP + 300_000)
NS_PER_SAMPLE_PER_OP = 1e9 / 20_000 / OPS

GROUPS = [
    ("glibc malloc/free", ("_int_malloc", "_int_free", "malloc", "cfree", "unlink_chunk",
                           "malloc_consolidate", "__libc_calloc", "__lll_lock", "realloc")),
    ("maple tree (RCU-mode writes included)", ("maple::",)),
    ("VMA index wrapper", ("maple_index", "legacy")),
    ("VMAs, anon links, merges", ("mm::vma::", "anon", "merge", "Arc<T,A>::drop_slow",
                                  "OnceLock")),
    ("lockless fault", ("lockless_fault",)),
    ("lock words (rwsem, VMA lock)", ("rwsem::", "vma_lock::", "RwSem<T>")),
    ("kernel", ("do_syscall", "[k]")),
]


def load(path):
    d = {}
    for line in open(path):
        n, sym = line.split("\t", 1)
        sym = sym.strip().removesuffix("- -").strip()
        d[sym] = d.get(sym, 0) + int(n)
    return d


def group(sym):
    for name, keys in GROUPS:
        if any(k in sym for k in keys):
            return name
    return "other model and harness code"


def main(out, a="turns", b="turns_processes"):
    t = load(f"{out}/{a}.sym")
    p = load(f"{out}/{b}.sym")
    baton = lambda s: "worker::{{closure}}" in s
    tot = lambda d: sum(v for s, v in d.items() if not baton(s)) * NS_PER_SAMPLE_PER_OP
    print(open(f"{out}/topology.txt").read().strip())
    for n in (a, b):
        print(n, [l.strip() for l in open(f"{out}/{n}.txt") if l.startswith("unrecorded")])
    print(f"ns an operation outside the baton: {a} {tot(t):.0f}, {b} {tot(p):.0f}, "
          f"difference {tot(t) - tot(p):+.0f}")
    by = {}
    for s in set(t) | set(p):
        if baton(s):
            continue
        g = group(s)
        x, y = by.get(g, (0, 0))
        by[g] = (x + t.get(s, 0), y + p.get(s, 0))
    print(f"{'group':42} {a[:8]:>8} {b[:8]:>8} {'diff':>8}")
    for g, (x, y) in sorted(by.items(), key=lambda kv: kv[1][1] - kv[1][0]):
        k = NS_PER_SAMPLE_PER_OP
        print(f"{g:42} {x * k:8.0f} {y * k:8.0f} {(x - y) * k:+8.0f}")
    print("\nlargest differences by symbol:")
    for s in sorted(set(t) | set(p), key=lambda s: p.get(s, 0) - t.get(s, 0))[:25]:
        if baton(s):
            continue
        k = NS_PER_SAMPLE_PER_OP
        print(f"{t.get(s, 0) * k:7.1f} {p.get(s, 0) * k:7.1f} {(t.get(s, 0) - p.get(s, 0)) * k:+7.1f}  {s[:80]}")


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[3:5])
