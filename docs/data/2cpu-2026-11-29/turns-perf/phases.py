"""Samples of `perf script -F ip,sym,dso` (call graphs recorded with
--call-graph dwarf at 4000 Hz) by phase of the call their stack is in
(the drain of deferred frees, munmap, mmap, the fault, anything else)
and by leaf (glibc's malloc and free, or the rest), in ns an operation.
Usage: python3 phases.py SCRIPT_OUTPUT OPERATIONS

DWARF unwinding here stops short of the thread's root on many samples,
so "other" holds those together with the baton's spin and the harness:
read the phases' rows, not the totals."""
import collections
import sys

HZ = 4000
PHASES = [
    ("drain (deferred frees)", ("free_ready", "Global::collect", "Quiescence")),
    ("munmap", (">::munmap",)),
    ("mmap", (">::mmap ", ">::mmap+", "do_mmap", "mmap_region")),
    ("fault", ("fault_in", "fault_locked", "lockless_fault")),
]
GLIBC = ("_int_malloc", "_int_free", "malloc", "cfree", "unlink_chunk",
         "malloc_consolidate", "calloc", "__lll_lock")


def samples(path):
    """Each sample's frames, leaf first."""
    stack = []
    for line in open(path, errors="replace"):
        if not line.strip():
            if stack:
                yield stack
            stack = []
        elif line[0] in "\t ":
            parts = line.strip().split(" ", 1)
            if len(parts) > 1:
                stack.append(parts[1])
        else:
            stack = []
    if stack:
        yield stack


def phase(stack):
    for name, keys in PHASES:
        if any(k in f for f in stack for k in keys):
            return name
    return "other"


def leaf(stack):
    f = stack[0]
    return "glibc" if "libc" in f and any(g in f.split("+")[0] for g in GLIBC) else "rest"


def main(path, ops):
    count = collections.Counter((phase(s), leaf(s)) for s in samples(path))
    k = 1e9 / HZ / ops
    for (p, l), v in sorted(count.items()):
        print(f"{p:26} {l:6} {v * k:8.0f} ns/op")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
