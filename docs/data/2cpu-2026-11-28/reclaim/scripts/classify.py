#!/usr/bin/env python3
"""Where the samples of `perf script` (a `perf record --call-graph dwarf`
of the lab's workers) fall: spinning on mmap_lock, the epoch drain,
the allocator inside an operation, or the rest of each call.
Usage: perf script -i perf.data | python3 classify.py"""
import collections
import sys

stacks = [s for s in sys.stdin.read().split('\n\n') if s.strip()]
counts = collections.Counter()


def symbol(line):
    parts = line.strip().split(' ', 1)
    return parts[1] if len(parts) > 1 else line.strip()


for st in stacks:
    frames = [symbol(l) for l in st.split('\n')[1:] if l.strip()][:6]
    head = ' '.join(frames)
    if any(x in head for x in ('RwSem<T>::write', 'RawRwSem::read_lock', 'RawRwSem::write_lock')):
        k = 'spinning on mmap_lock (or its slow path)'
    elif 'Guard::flush' in st:
        k = 'drain (deferred frees, outside locks)'
    elif any(x in head for x in ('malloc', 'free', '_int_', 'calloc', 'realloc', 'unlink_chunk', 'consolidate', 'lll_lock')):
        k = 'allocator, inside the operation'
    elif 'Mm>::munmap' in st:
        k = 'munmap, the rest'
    elif 'Mm>::mmap' in st:
        k = 'mmap, the rest'
    elif 'fault' in st:
        k = 'fault, the rest'
    else:
        k = 'other'
    counts[k] += 1
n = sum(counts.values())
for k, v in counts.most_common():
    print(f'{v / n * 100:5.1f}% {k}')
print(f'{n} samples')
