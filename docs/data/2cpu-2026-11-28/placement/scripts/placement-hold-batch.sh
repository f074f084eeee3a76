#!/bin/bash
# The last step (the whole validation under hold) was stopped after 6 minutes: the
# host had moved the CPUs to 33 ns and every run waited 30 s for 105 ns. That led to
# the rule that hold follows a placement the host keeps past the wait; it was run
# again in placement-33-batch.sh with that build.
cd /work/main
B=./target/release/vmbench
log() { echo "$(date -u +%T) $*" >> /tmp/w/b/times.txt; }
log i11 start
$B run --workloads brk1,mmap1,mmap2,malloc1,page_fault3,kernbench,execl --index maple,legacy --threads 1,2 --repeat 3 --json > /tmp/w/b/issue11-command.jsonl 2> /tmp/w/b/issue11-stderr.txt
log i11 end; log suite start
$B suite --out /tmp/w/b/suite > /tmp/w/b/suite.log 2>&1
log suite end; log val105 start
$B project --validate --workloads execl --repeat 3 --placement 105 --out /tmp/w/b/validation-105 > /tmp/w/b/val105.log 2>&1
log val105 end; log val start
$B project --validate --repeat 3 --out /tmp/w/b/validation > /tmp/w/b/val.log 2>&1
log val end
