#!/usr/bin/env bash
# Large persistent bodies with confirms, side by side: Warren at HEAD,
# Warren at BASE (a commit to compare with; optional) and, when
# RABBITMQ_URL and RABBITMQ_PID are set, RabbitMQ, alternating in each of
# ROUNDS rounds. Each run reports warrenperf's summary and the bytes the
# broker process wrote to disk per message consumed (/proc/PID/io's
# write_bytes, so the page cache's writes count once the kernel sends them).
#
#   RABBITMQ_URL=amqp://guest:guest@127.0.0.1:5690/ RABBITMQ_PID=$(pgrep -f 'beam.*ref@localhost') \
#     BASE=2f29717 ROUNDS=2 tests/bench/largebodies.sh
#
# SIZES (default "1048576 16777216") and DURATION (default 15s) choose the
# load; the -qos and -confirm window is 20 for 1 MiB, 4 for 16 MiB, as in
# BENCHMARKS.md's earlier large-message runs. MODE=transient publishes
# transient messages without confirms, as fast as the producer can, into a
# non-durable queue, and reports each broker's peak resident memory
# (VmHWM: Warren's is of its run, RabbitMQ's since it started).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
duration=${DURATION:-15s}
rounds=${ROUNDS:-2}
sizes=${SIZES:-1048576 16777216}

(cd "$root" && go build -o "$work/warren-head" ./cmd/warren && go build -o "$work/warrenperf" ./cmd/warrenperf)
builds="head"
if [ -n "${BASE:-}" ]; then
	git -C "$root" worktree add -q "$work/base" "$BASE"
	(cd "$work/base" && go build -o "$work/warren-base" ./cmd/warren)
	git -C "$root" worktree remove --force "$work/base"
	builds="head base"
fi

start_warren() { # build
	rm -rf "$work/data"
	"$work/warren-$1" -listen 127.0.0.1:0 -data "$work/data" >"$work/warren.log" 2>&1 &
	echo $! >"$work/pid"
	for _ in $(seq 200); do
		addr=$(sed -n 's/.*"listener":"amqp","addr":"\([^"]*\)".*/\1/p' "$work/warren.log" | head -1)
		[ -n "$addr" ] && break
		sleep 0.05
	done
	url="amqp://guest:guest@$addr/"
	pid=$(cat "$work/pid")
}

stop_warren() {
	kill "$(cat "$work/pid")" && while kill -0 "$(cat "$work/pid")" 2>/dev/null; do sleep 0.05; done
}

written() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }

run() { # label url pid size
	local label=$1 url=$2 pid=$3 size=$4 window=20
	[ "$size" -ge $((8 << 20)) ] && window=4
	local before out consumed after load="-persistent -durable -confirm $window"
	[ "${MODE:-persistent}" = transient ] && load=""
	before=$(written "$pid")
	# shellcheck disable=SC2086
	out=$("$work/warrenperf" -url "$url" -broker-pid "$pid" -size "$size" $load \
		-queue "large-$size" -qos "$window" -duration "$duration" | grep '^summary')
	after=$(written "$pid")
	consumed=$(echo "$out" | sed -n 's/.*; consumed \([0-9]*\) = .*/\1/p')
	echo "$out" | sed "s/^summary:/$label size=$size/"
	echo "$label size=$size peak_rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")"
	if [ -n "$consumed" ] && [ "$consumed" -gt 0 ]; then
		echo "$label size=$size disk_written_per_msg=$(((after - before) / consumed)) body=$size ratio=$(echo "scale=2; ($after - $before) / $consumed / $size" | bc)"
	fi
}

for round in $(seq "$rounds"); do
	echo "# round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	for size in $sizes; do
		for b in $builds; do
			start_warren "$b"
			run "warren-$b" "$url" "$pid" "$size"
			stop_warren
		done
		if [ -n "${RABBITMQ_URL:-}" ]; then
			run rabbitmq "$RABBITMQ_URL" "${RABBITMQ_PID:-0}" "$size"
			curl -s -u guest:guest -X DELETE "${RABBITMQ_ADMIN:-http://127.0.0.1:15690}/api/queues/%2F/large-$size" >/dev/null || true
		fi
	done
done
