#!/bin/bash
# every round: transfer, then base, all, mix, padpop (execl single 1,2 workers)
end=$(( $(date +%s) + ${SECS:-600} ))
while [ $(date +%s) -lt $end ]; do
  echo "# $(date +%T) $(/tmp/vmb-base topology --measure 2>&1 | grep -A2 pairs | tail -1)"
  /tmp/abx.sh 1 vmb-base vmb-all vmb-mix vmb-padpop vmb-base
done
