#!/usr/bin/env bash
# Measures the memory alarm for BENCHMARKS.md: how far above the watermark
# the broker's resident memory peaks while a publisher fills a queue (the
# overshoot), and how long after the queue is purged the publisher is
# unblocked (the release time). tests/bench/alarmprobe drives the load.
#
#   tests/bench/memalarm.sh                  # Warren, built from this tree
#   WARREN_BIN=/path/to/warren tests/bench/memalarm.sh
#   RABBITMQ_URL=amqp://guest:guest@127.0.0.1:5699/ RABBITMQ_PID=$(pgrep -f beam.smp) tests/bench/memalarm.sh rabbitmq
#
# WATERMARK (bytes, default 256000000) becomes Warren's
# memory_high_watermark as a fraction of MemTotal; start RabbitMQ with
# vm_memory_high_watermark.absolute set to the same value, afresh for each
# run (RUNS, default 3, applies to Warren). PROBE_TIMEOUT (default 5m)
# bounds the wait for the block and for the release. Warren's queue keeps every
# message in memory (queue_memory_messages = 0, queue_memory_bytes = 0B),
# as a worst case: by default it would page past 64 MiB and never reach the
# watermark.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill -9 $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
watermark=${WATERMARK:-256000000}
runs=${RUNS:-3}
(cd "$root" && go build -o "$work/alarmprobe" ./tests/bench/alarmprobe)
if [ -z "${WARREN_BIN:-}" ]; then
	(cd "$root" && go build -o "$work/warren" ./cmd/warren)
	WARREN_BIN=$work/warren
fi

kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }

report() { # pid idle_kb
	local hwm
	hwm=$(kb "$1" VmHWM)
	awk -v h="$hwm" -v i="$2" -v w="$watermark" 'BEGIN {
		printf "idle RSS %d MB, peak RSS %d MB = %.2fx the %d MB watermark\n", i*1024/1e6, h*1024/1e6, h*1024/w, w/1e6 }'
}

probe() { # url pid
	local idle
	idle=$(kb "$2" VmRSS)
	echo 5 >"/proc/$2/clear_refs" # reset VmHWM, the peak
	"$work/alarmprobe" -url "$1" -size 1024 -producers 2 -timeout "${PROBE_TIMEOUT:-5m}" || true
	report "$2" "$idle"
}

if [ "${1:-warren}" = rabbitmq ]; then
	probe "$RABBITMQ_URL" "$RABBITMQ_PID"
	exit
fi

total=$(awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo)
fraction=$(awk -v w="$watermark" -v t="$total" 'BEGIN {printf "%.6f", w/t}')
printf '[admin]\nlisten = "127.0.0.1:0"\n[log]\nformat = "json"\n[resources]\nmemory_high_watermark = %s\n[storage]\nqueue_memory_messages = 0\nqueue_memory_bytes = "0B"\n' \
	"$fraction" >"$work/broker.toml"
for run in $(seq "$runs"); do
	rm -rf "$work/data"
	"$WARREN_BIN" -config "$work/broker.toml" -listen 127.0.0.1:0 -data "$work/data" >"$work/warren.log" 2>&1 &
	echo $! >"$work/pid"
	until grep -q '"message":"Warren started"' "$work/warren.log"; do sleep 0.05; done
	addr=$(sed -n 's/.*"listener":"amqp","addr":"\([^"]*\)".*/\1/p' "$work/warren.log" | head -1)
	sleep 2 # let start-up settle before the idle figure
	echo "## run $run (memory_high_watermark = $fraction)"
	probe "amqp://guest:guest@$addr/" "$(cat "$work/pid")"
	kill -9 "$(cat "$work/pid")"
	wait "$(cat "$work/pid")" 2>/dev/null || true
done
