#!/bin/sh
# The CPU seconds (1/100 s ticks) the given processes use while a command runs:
#   tests/bench/cpusum.sh PID... -- warrenperf ...
# usage: cpu3.sh PID... -- command: prints the total CPU seconds the pids used while command ran
pids=""; while [ "$1" != "--" ]; do pids="$pids $1"; shift; done; shift
t0=0; for p in $pids; do t0=$((t0 + $(awk '{print $14+$15}' /proc/$p/stat))); done
"$@"
t1=0; for p in $pids; do t1=$((t1 + $(awk '{print $14+$15}' /proc/$p/stat))); done
echo "cpu ticks total: $((t1 - t0)) (1/100 s)"
