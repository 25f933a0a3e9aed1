#!/bin/bash
# One quorum-queue run of warrenperf against a three-node cluster, with
# the CPU of the cluster's processes summed per message consumed:
#
#   PIDS="P1 P2 P3" tests/bench/quorum3.sh QUEUE PUBLISH_URL CONSUME_URL [warrenperf flags...]
#
# 16-byte persistent messages, prefetch 1000, DUR (15s) long; the flags
# add -confirm 100, -rate 1000 and so on. Start the clusters with
# tests/bench/cluster3.sh (Warren) or tests/bench/rabbitmq3.sh (RabbitMQ).
# WARRENPERF names the warrenperf binary (default: warrenperf on PATH).
set -e
name=$1; pub=$2; cons=$3; shift 3
wp=${WARRENPERF:-warrenperf}
cpu() { t=0; for p in $PIDS; do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $t; }
t0=$(cpu)
out=$($wp -url "$pub" -consume-url "$cons" -queue "$name" -queue-type quorum -persistent -qos 1000 -duration "${DUR:-15s}" "$@" 2>/dev/null)
t1=$(cpu)
n=$(echo "$out" | sed -n 's/.*consumed \([0-9]*\) = .*/\1/p')
echo "$out" | grep -E "summary: (published|latency median)"
echo "cluster CPU per message: $(( (t1 - t0) * 10000 / n )) µs (ticks $((t1 - t0)), consumed $n)"
