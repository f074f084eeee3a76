#!/usr/bin/env python3
"""One line per `vmbench run --json` row on stdin: throughput, mmap_lock's
acquisitions an operation, the share of them contended, the time the
workers waited for it (of their wall time), the workers' CPU time an
operation outside those waits, and the VMA lock's acquisitions an
operation. Usage: vmbench run ... --json | python3 atonce.py LABEL"""
import json
import sys

for line in sys.stdin:
    r = json.loads(line)
    ops, secs, t = r["ops"], r["seconds"], r["threads"]
    m, v = r["locks"]["mmap_lock"], r["locks"]["vma_lock"]
    wait = m["wait_ns"]
    print(f"{sys.argv[1]:12} x{t} {r['value']:8.0f} ops/s  "
          f"mmap_lock {m['acquisitions'] / ops:.2f}/op "
          f"contended {m['contended'] / max(m['acquisitions'], 1) * 100:4.1f}%  "
          f"wait {wait / 1e9 / secs / t * 100:4.1f}% of wall  "
          f"cpu-not-waiting {(r['cpu']['on_cpu_ns'] - wait) / ops:6.0f} ns/op  "
          f"vma_lock {v['acquisitions'] / ops:.2f}/op")
