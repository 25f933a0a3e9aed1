#!/usr/bin/env bash
# The stream protocol, Warren against RabbitMQ 3.10.8's stream plugin on
# the same machine, with the official Go client's load tool
# (rabbitmq-stream-go-client v1.8.3's perfTest), brokers alternating:
#
#   tests/bench/streamproto.sh            # as root; DURATION=30 ROUNDS=1
#
# Scenarios (SCENARIOS="name,consumers,body[,rate] ..."): one publisher
# (batches of 100) and no consumer, 1 KB; one publisher and one consumer
# from first, 1 KB and 16 B bodies; one publisher and ten consumers, 1 KB;
# one publisher at a fixed 20,000 msg/s and one consumer, 1 KB (the
# tool's mean end-to-end latency; it reports no percentiles). Then, for
# percentiles, warrenperf -stream-url at fixed rates (RATES, messages a
# second, default "1000 10000"), 1 KB, one consumer: publish-to-delivery
# and publish-to-confirm p50/p99, and the broker's CPU per message.
# Then drains (DRAINS="name,consumers,body ...", default one and ten
# consumers of 1 KB and one of 16 B; DRAINS="" for none): a stream filled
# for DURATION seconds first, read from first with no publisher, the
# consumed rate and the broker's CPU per message consumed. Each run has a
# stream of its own.
#
# perfTest is built with 1 MiB socket buffers (SetReadBuffer and
# SetWriteBuffer on its environment): the client's default of 8 KiB
# leaves the broker's confirms waiting on the client's receive window
# (ss -ti: rwnd_limited 76-89% of the time, for RabbitMQ and Warren
# alike), and a run then measures that stall, between 10k and 80k msg/s
# from one run to the next, not the broker. Per run it prints the tool's averages
# (published, confirmed and consumed msg/s, mean latency) and the
# broker's CPU seconds over the run, from /proc/PID/stat, with the CPU
# per published message. Warren listens for streams on 5562, RabbitMQ
# (node sbench@localhost, Debian's rabbitmq-server) on 5563.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=streamperf.sh
. "$root/tests/bench/streamperf.sh"
DURATION=${DURATION:-30}
ROUNDS=${ROUNDS:-1}
work=$(mktemp -d)
chmod 755 "$work" # the rabbitmq user reads its node's directory inside
r=$work/rabbitmq
cleanup() {
	[ -n "${wpid:-}" ] && kill "$wpid" 2>/dev/null || true
	(cd /var/lib/rabbitmq && runuser -u rabbitmq -- env HOME="$r" RABBITMQ_CONF_ENV_FILE="$r/env.conf" \
		/usr/lib/rabbitmq/bin/rabbitmqctl -n sbench@localhost stop >/dev/null 2>&1) || true
	[ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

echo "--- building warren and perfTest"
(cd "$root" && go build -o "$work/warren" ./cmd/warren && go build -o "$work/warrenperf" ./cmd/warrenperf)
build_perf

echo "--- starting Warren (5562) and RabbitMQ (5563)"
"$work/warren" -listen 127.0.0.1:5692 -stream 127.0.0.1:5562 -admin off -data "$work/wdata" >"$work/warren.log" 2>&1 &
wpid=$!
mkdir -p "$r/mnesia" "$r/log"
echo "[rabbitmq_stream]." >"$r/enabled_plugins"
cat >"$r/rabbitmq.conf" <<CONF
listeners.tcp.default = 5693
stream.listeners.tcp.1 = 5563
stream.advertised_host = localhost
stream.advertised_port = 5563
CONF
: >"$r/env.conf"
chown -R rabbitmq:rabbitmq "$r"
(cd /var/lib/rabbitmq && runuser -u rabbitmq -- env HOME="$r" RABBITMQ_NODENAME=sbench@localhost \
	RABBITMQ_MNESIA_BASE="$r/mnesia" RABBITMQ_LOG_BASE="$r/log" RABBITMQ_ENABLED_PLUGINS_FILE="$r/enabled_plugins" \
	RABBITMQ_CONFIG_FILE="$r/rabbitmq" RABBITMQ_CONF_ENV_FILE="$r/env.conf" RABBITMQ_DIST_PORT=25693 \
	/usr/lib/rabbitmq/bin/rabbitmq-server >"$r/out.log" 2>&1 &)
for _ in $(seq 120); do
	(echo >/dev/tcp/127.0.0.1/5562) 2>/dev/null && (echo >/dev/tcp/127.0.0.1/5563) 2>/dev/null && break
	sleep 1
done
rpid=$(ss -ltnpH 'sport = :5563' | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
[ -n "$rpid" ] || { echo "RabbitMQ did not start" >&2; cat "$r/out.log" >&2; exit 1; }
echo "--- runs of ${DURATION}s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
	for sc in ${SCENARIOS:-1KB-0c,0,992 1KB-1c,1,992 16B-1c,1,8 1KB-10c,10,992 1KB-1c-20k,1,992,20000}; do
		IFS=, read -r name consumers body rate <<<"$sc"
		perf_run warren 5562 "$name" "$consumers" "$body" "${rate:-0}" "$wpid"
		perf_run rabbitmq 5563 "$name" "$consumers" "$body" "${rate:-0}" "$rpid"
	done
done

latency() { # broker port pid rate
	local broker=$1 port=$2 pid=$3 rate=$4
	"$work/warrenperf" -stream-url "rabbitmq-stream://guest:guest@localhost:$port/" -queue "lat-$broker-$rate-$RANDOM" \
		-producers 1 -consumers 1 -size 1000 -rate "$rate" -duration "${DURATION}s" -broker-pid "$pid" -json 2>/dev/null |
		jq -r --arg b "$broker" --arg r "$rate" '"\($b|.[0:8]) \($r) msg/s: delivered \(.consume_rate|floor) msg/s, latency p50 \(.latency_ms.p50*100|floor/100) p99 \(.latency_ms.p99*100|floor/100) ms, confirm p50 \(.confirm_latency_ms.p50*100|floor/100) p99 \(.confirm_latency_ms.p99*100|floor/100) ms, broker \(.broker_cpu_us_per_message*10|floor/10) us/msg"'
}

echo "--- warrenperf at fixed rates, ${DURATION}s each"
for round in $(seq "$ROUNDS"); do
	for rate in ${RATES:-1000 10000}; do
		latency warren 5562 "$wpid" "$rate"
		latency rabbitmq 5563 "$rpid" "$rate"
	done
done

echo "--- drains: a filled stream read from first, ${DURATION}s each"
for round in $(seq "$ROUNDS"); do
	for sc in ${DRAINS-1KB-1c,1,992 1KB-10c,10,992 16B-1c,1,8}; do
		IFS=, read -r name consumers body <<<"$sc"
		drain_run warren 5562 "$name" "$consumers" "$body" "$wpid"
		drain_run rabbitmq 5563 "$name" "$consumers" "$body" "$rpid"
	done
done
