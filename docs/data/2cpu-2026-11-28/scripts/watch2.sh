#!/bin/bash
end=$(( $(date +%s) + ${SECS:-300} ))
while [ $(date +%s) -lt $end ]; do
  for imap in single split single distributed; do
    echo -n "$(date +%T) $imap "
    EXTRA="--imap $imap" DUR=1 /tmp/abx.sh 1 vmb-base
  done
done
