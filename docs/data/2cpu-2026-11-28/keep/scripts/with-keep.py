#!/usr/bin/env python3
"""Copies validation evidence written before machine descriptions had
`keep` (which then reads as 0) with `keep` set to one value, so that
`vmbench project --validate --replay` can show what the rule changes on
measurements already taken:

    python3 with-keep.py KEEP IN.jsonl.gz OUT.jsonl.gz
"""
import gzip
import json
import sys

keep, src, dst = float(sys.argv[1]), sys.argv[2], sys.argv[3]
with gzip.open(src, "rt") as f, gzip.open(dst, "wt") as out:
    for line in f:
        o = json.loads(line)
        for p in o.get("points", []):
            for m in p.get("machines", []):
                m["keep"] = keep
        out.write(json.dumps(o) + "\n")
