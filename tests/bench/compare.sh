#!/usr/bin/env bash
# Runs BENCHMARKS.md's load scenarios with warrenperf against a freshly
# started Warren and, when RABBITMQ_URL is set, against that RabbitMQ too,
# one broker at a time with the same client load.
#
#   tests/bench/compare.sh [scenario...]
#   RABBITMQ_URL=amqp://guest:guest@127.0.0.1:5673/ RABBITMQ_PID=$(pgrep beam.smp) tests/bench/compare.sh
#
# Scenarios: transient topic10k persistent persistent1k backlog recovery plugin
# (default: all). DURATION (default 20s) sets how long each load runs.
# RABBITMQ_CTL (rabbitmqctl with its -n node) lets the recovery scenario
# restart RabbitMQ too.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
duration=${DURATION:-20s}
scenarios=${*:-transient topic10k persistent persistent1k backlog recovery plugin}

(cd "$root" && go build -o "$work/warren" ./cmd/warren && go build -o "$work/warrenperf" ./cmd/warrenperf)
perf="$work/warrenperf"

start_warren() {
	rm -rf "$work/data"
	"$work/warren" -listen 127.0.0.1:0 -data "$work/data" "$@" >"$work/warren.log" 2>&1 &
	echo $! >"$work/pid"
	for _ in $(seq 200); do
		addr=$(sed -n 's/.*"listener":"amqp","addr":"\([^"]*\)".*/\1/p' "$work/warren.log" | head -1)
		[ -n "$addr" ] && break
		sleep 0.05
	done
	warren_url="amqp://guest:guest@$addr/"
	admin=$(sed -n 's/.*"listener":"admin","addr":"\([^"]*\)".*/\1/p' "$work/warren.log" | head -1)
}

stop_warren() {
	kill "$(cat "$work/pid")" && while kill -0 "$(cat "$work/pid")" 2>/dev/null; do sleep 0.05; done
}

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

run() { # name url pid args... : pid (0 when unknown) gets its CPU per message reported
	local name=$1 url=$2 pid=$3
	shift 3
	echo "## $name"
	"$perf" -url "$url" -broker-pid "$pid" "$@" | grep '^summary'
}

both() { # name args... : the same load against Warren, then RabbitMQ
	local name=$1
	shift
	start_warren
	run "$name: Warren" "$warren_url" "$(cat "$work/pid")" "$@"
	stop_warren
	if [ -n "${RABBITMQ_URL:-}" ]; then
		run "$name: RabbitMQ" "$RABBITMQ_URL" "${RABBITMQ_PID:-0}" "$@"
	fi
}

cfgfile() { # writes a broker.toml with the admin API on and more settings
	printf '[admin]\nlisten = "127.0.0.1:0"\n[log]\nformat = "json"\n%s' "${1:-}" >"$work/broker.toml"
	echo "$work/broker.toml"
}

for s in $scenarios; do
	case $s in
	transient)
		both "transient, 16 B, 1 producer, 1 consumer, auto-ack" -duration "$duration" -size 16 -autoack -queue bench.transient
		;;
	topic10k)
		both "topic exchange with 10,000 bindings, 16 B, auto-ack" -duration "$duration" -size 16 -autoack \
			-queue bench.topic -exchange bench.topic -exchange-type topic -key stock.ibm.nyse -extra-bindings 10000
		;;
	persistent)
		both "persistent, 16 B, confirms (256 in flight), manual acks (prefetch 256)" -duration "$duration" -size 16 \
			-persistent -durable -confirm 256 -qos 256 -queue bench.persistent
		;;
	persistent1k)
		both "persistent, 1 KiB, confirms (256 in flight), manual acks (prefetch 256)" -duration "$duration" -size 1024 \
			-persistent -durable -confirm 256 -qos 256 -queue bench.persistent1k
		;;
	backlog)
		echo "## backlog of 1,000,000 persistent 1 KiB messages, no consumer: resident memory"
		start_warren
		"$perf" -url "$warren_url" -consumers 0 -pmessages 1000000 -duration 1h -size 1024 -persistent -durable -confirm 256 -queue bench.backlog | grep '^summary: published'
		sleep 5
		echo "Warren RSS: $(rss_kb "$(cat "$work/pid")") kB"
		stop_warren
		if [ -n "${RABBITMQ_URL:-}" ] && [ -n "${RABBITMQ_PID:-}" ]; then
			"$perf" -url "$RABBITMQ_URL" -consumers 0 -pmessages 1000000 -duration 1h -size 1024 -persistent -durable -confirm 256 -queue bench.backlog | grep '^summary: published'
			sleep 5
			echo "RabbitMQ RSS: $(rss_kb "$RABBITMQ_PID") kB"
			[ -n "${RABBITMQ_CTL:-}" ] && $RABBITMQ_CTL delete_queue bench.backlog >/dev/null
		fi
		;;
	recovery)
		echo "## recovery of a store holding 1,000,000 persistent 16 B messages"
		start_warren
		"$perf" -url "$warren_url" -consumers 0 -pmessages 1000000 -duration 1h -size 16 -persistent -durable -confirm 256 -queue bench.recovery | grep '^summary: published'
		stop_warren
		t0=$(date +%s%N)
		"$work/warren" -listen 127.0.0.1:0 -data "$work/data" >"$work/warren.log" 2>&1 &
		echo $! >"$work/pid"
		until grep -q '"message":"Warren started"' "$work/warren.log"; do sleep 0.01; done
		t1=$(date +%s%N)
		echo "Warren restart with 1M messages: $(((t1 - t0) / 1000000)) ms ($(grep -o '"messages":[0-9]*' "$work/warren.log" | head -1))"
		kill "$(cat "$work/pid")"
		if [ -n "${RABBITMQ_URL:-}" ] && [ -n "${RABBITMQ_CTL:-}" ]; then
			"$perf" -url "$RABBITMQ_URL" -consumers 0 -pmessages 1000000 -duration 1h -size 16 -persistent -durable -confirm 256 -queue bench.recovery | grep '^summary: published'
			$RABBITMQ_CTL stop_app >/dev/null
			t0=$(date +%s%N)
			$RABBITMQ_CTL start_app >/dev/null
			until $RABBITMQ_CTL list_queues name messages 2>/dev/null | grep -q 'bench.recovery.1000000'; do sleep 0.1; done
			t1=$(date +%s%N)
			echo "RabbitMQ start_app with 1M messages: $(((t1 - t0) / 1000000)) ms"
			$RABBITMQ_CTL delete_queue bench.recovery >/dev/null
		fi
		;;
	plugin)
		# core/wasmhost/testdata/direct is the built-in direct type's logic as
		# a Go plugin (type x-direct): the difference is the plugin boundary.
		mkdir -p "$work/plugins"
		(cd "$root" && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o "$work/plugins/direct.wasm" ./core/wasmhost/testdata/direct)
		for producers in 1 2; do
			start_warren -config "$(cfgfile "$(printf '[plugins]\ndir = "%s"\nenabled = ["direct"]\n' "$work/plugins")")"
			run "built-in direct exchange, $producers producer(s), 16 B, auto-ack" "$warren_url" "$(cat "$work/pid")" -duration "$duration" -size 16 -autoack \
				-producers "$producers" -queue bench.direct -exchange bench.direct -exchange-type direct -key k
			run "x-direct plugin exchange (the same logic as a Go plugin), $producers producer(s), 16 B, auto-ack" "$warren_url" "$(cat "$work/pid")" -duration "$duration" -size 16 -autoack \
				-producers "$producers" -queue bench.plugin -exchange bench.plugin -exchange-type x-direct -key k
			stop_warren
		done
		;;
	*)
		echo "unknown scenario $s" >&2
		exit 2
		;;
	esac
done
