#!/bin/bash
# usage: run.sh BIN TAG ROUND
BIN=$1; TAG=$2; R=$3
for d in /work/main/docs/data/2cpu-2026-11-29/seats/val-default-{1,2,3} /work/main/docs/data/2cpu-2026-11-28/recorder-time/{c,val}-new-{1,2,3}; do
  n=$(basename $d)
  $BIN project --replay $d --rerecord --out /tmp/rr/$TAG-$R/$n > /dev/null 2>> /tmp/rr/$TAG-$R.err
done
