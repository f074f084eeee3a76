#!/bin/bash
# two independent OS processes, one worker each, at the same time; then the lab's 2-worker run
b=$1; w=$2; idx=$3
one() { $b run --workloads $w --mode processes --index $idx --threads 1 --no-pin --repeat 1 --duration ${DUR:-3} --json 2>/dev/null | python3 -c 'import sys,json; print(json.loads(sys.stdin.readline())["value"])'; }
two() { $b run --workloads $w --mode processes --index $idx --threads 2 --repeat 1 --duration ${DUR:-3} --json 2>/dev/null | python3 -c 'import sys,json; print(json.loads(sys.stdin.readline())["value"])'; }
s=$(one); a=$(taskset -c 0 bash -c "$(declare -f one); b=$b w=$w idx=$idx; one" > /tmp/p0 & taskset -c 1 bash -c "$(declare -f one); b=$b w=$w idx=$idx; one" > /tmp/p1; wait; echo); t=$(two)
python3 -c "s=$s; p0=float(open('/tmp/p0').read()); p1=float(open('/tmp/p1').read()); t=$t; print(f'solo {s:.0f}  two-processes {(p0+p1)/s:.3f}x ({p0:.0f}+{p1:.0f})  lab-2-workers {t/s:.3f}x')"
