#!/bin/bash
# Waits for the slow placement (transfer > 80 ns), then runs the control at once.
end=$(( $(date +%s) + ${SECS:-900} ))
while [ $(date +%s) -lt $end ]; do
  t=$(/tmp/vmb-new2 topology --measure 2>&1 | grep -A2 pairs | tail -1 | awk '{print $3}')
  if python3 -c "import sys; sys.exit(0 if float('$t') > 80 else 1)"; then
    echo "$(date +%T) transfer $t"
    DUR=2 /tmp/pair.sh /tmp/vmb-new2 mmap1 maple
    DUR=2 /tmp/pair.sh /tmp/vmb-new2 kernbench maple
    t2=$(/tmp/vmb-new2 topology --measure 2>&1 | grep -A2 pairs | tail -1 | awk '{print $3}')
    echo "$(date +%T) transfer after $t2"
  else
    sleep 8
  fi
done
