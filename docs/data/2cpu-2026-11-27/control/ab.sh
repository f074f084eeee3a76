#!/bin/bash
# What ran (2026-11-27, 15:28 UTC, this project's 2-vCPU guest): the
# threads rows of `project --validate`, three rounds, each round the
# build with the turns' control (`ctl`) and the same build told by a
# temporary environment variable, VMB_NOCTL, to calibrate the interleaved
# profile to the threads' turns alone, as 86c4567 did (`noctl`). That
# build also printed each configuration's rates on stderr (TMP lines:
# one worker, the threads' turns, the control's turns). Neither the
# variable nor the line is in the committed code, and its recorded
# turns announced their quiescent state (every 1024 rounds, more than a
# recording makes) inside worker 1's turn, not between turns as committed.
cd /work/main
for r in 1 2 3; do
 for v in ctl noctl; do
  if [ $v = noctl ]; then export VMB_NOCTL=1; else unset VMB_NOCTL; fi
  ./target/release/vmbench project --validate --workloads brk1,mmap1,malloc1,mmap2,page_fault3 --mode threads --repeat 3 --json --out /tmp/ab/$v-$r > /tmp/ab/$v-$r.jsonl 2>/tmp/ab/$v-$r.err
 done
done
