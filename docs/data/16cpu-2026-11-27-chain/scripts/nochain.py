#!/usr/bin/env python3
"""Copy validation evidence with every Lines step's `chain` count removed.

Replayed (`vmbench project --validate --replay OUT`), the copy gives the
predictions of the pricing before lines reached through a pointer were
counted apart, against the same measurements:

    python3 nochain.py evidence.jsonl.gz /tmp/nochain.jsonl.gz
"""
import gzip
import json
import sys


def strip(o):
    if isinstance(o, dict):
        if o.get("step") == "lines":
            o.pop("chain", None)
        for v in o.values():
            strip(v)
    elif isinstance(o, list):
        for v in o:
            strip(v)


src, dst = sys.argv[1], sys.argv[2]
with gzip.open(src, "rt") as f, gzip.open(dst, "wt") as g:
    for line in f:
        o = json.loads(line)
        strip(o)
        g.write(json.dumps(o) + "\n")
