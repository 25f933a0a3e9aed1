#!/usr/bin/env bash
# The stream protocol on three nodes: Warren's cluster, then RabbitMQ
# 3.10.8's (Debian's rabbitmq-server with rabbitmq_stream), each alone on
# the machine while it runs, under the same load of the Go stream client's
# perfTest (built from rabbitmq-stream-go-client v1.8.3 with 1 MiB socket
# buffers, as streamproto.sh builds it). The client connects to the first
# node and goes where metadata sends it: publishers to the stream's
# leader, consumers to a replica. Streams have three replicas (both
# brokers' default on three nodes). Each line gives the rates perfTest
# reports and the CPU of the three broker processes summed, per message
# published.
#
#   DURATION=20 tests/bench/streamproto3.sh      (as root)
#
# SCENARIOS as in streamproto.sh ("name,consumers,body"); ONLY=warren
# leaves RabbitMQ out, for trying a change; PROFILE=DIR writes each Warren
# node's CPU profile of the whole run to DIR/wN.pprof.
#
# Warren: AMQP 5701..5703, stream 5721..5723, cluster 5711..5713.
# RabbitMQ: AMQP 5681..5683, stream 5591..5593, nodes s1..s3@localhost.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=streamperf.sh
. "$root/tests/bench/streamperf.sh"
DURATION=${DURATION:-20}
SCENARIOS=${SCENARIOS:-1KB-0c,0,992 1KB-1c,1,992 16B-1c,1,8}
work=$(mktemp -d)
chmod 755 "$work"
rmqctl() { # node args...
	local n=$1
	shift
	(cd /var/lib/rabbitmq && runuser -u rabbitmq -- env HOME=/var/lib/rabbitmq \
		/usr/lib/rabbitmq/bin/rabbitmqctl -n "$n@localhost" "$@")
}
stop_all() {
	local p i
	for p in "$work"/w*/pid; do
		if [ -f "$p" ]; then kill "$(cat "$p")" 2>/dev/null || true; fi
	done
	for i in 1 2 3; do rmqctl "s$i" stop >/dev/null 2>&1 || true; done
}
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
# A node left running by an earlier run would take this run's load (and
# its streams would fill the disk): refuse to start beside one.
for port in 5701 5702 5703 5721 5722 5723 5681 5682 5683 5591 5592 5593; do
	if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "port $port is in use: a broker of an earlier run still running?" >&2
		exit 1
	fi
done

echo "--- building warren and perfTest"
(cd "$root" && go build -o "$work/warren" ./cmd/warren)
build_perf

wait_port() { for _ in $(seq 120); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 1; done; return 1; }

echo "--- Warren: three nodes"
for i in 1 2 3; do
	d=$work/w$i
	mkdir -p "$d"
	seeds=""
	[ "$i" -gt 1 ] && seeds='"127.0.0.1:5711"'
	printf '[admin]\nlisten = ""\n[stream]\nlisten = ["127.0.0.1:572%s"]\n[cluster]\nnode_name = "w%s"\nlisten = "127.0.0.1:571%s"\nseeds = [%s]\nsecret = "a secret of sixteen+"\n' \
		"$i" "$i" "$i" "$seeds" >"$d/broker.toml"
	profile=()
	[ -z "${PROFILE:-}" ] || profile=(-cpuprofile "$PROFILE/w$i.pprof")
	"$work/warren" -config "$d/broker.toml" -listen "127.0.0.1:570$i" -data "$d/data" "${profile[@]}" >"$d/log" 2>&1 &
	echo $! >"$d/pid"
	wait_port "572$i" || { echo "warren w$i did not start" >&2; tail "$d/log" >&2; exit 1; }
done
sleep 3
wpids=$(cat "$work"/w*/pid | tr '\n' ' ')
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for sc in $SCENARIOS; do
	IFS=, read -r name consumers body <<<"$sc"
	# shellcheck disable=SC2086
	perf_run warren 5721 "$name" "$consumers" "$body" 0 $wpids
done
for p in "$work"/w*/pid; do kill "$(cat "$p")"; done
rm -f "$work"/w*/pid
sleep 3

[ "${ONLY:-}" != warren ] || exit 0
echo "--- RabbitMQ 3.10.8: three nodes"
for i in 1 2 3; do
	d=$work/s$i
	mkdir -p "$d/log" "$d/mnesia"
	echo "[rabbitmq_stream]." >"$d/enabled_plugins"
	cat >"$d/rabbitmq.conf" <<-CONF
		listeners.tcp.default = 568$i
		stream.listeners.tcp.1 = 559$i
		stream.advertised_host = localhost
		stream.advertised_port = 559$i
		loopback_users = none
	CONF
	chown -R rabbitmq:rabbitmq "$d"
	(cd /var/lib/rabbitmq && runuser -u rabbitmq -- env HOME=/var/lib/rabbitmq RABBITMQ_NODENAME="s$i@localhost" \
		RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
		RABBITMQ_CONFIG_FILE="$d/rabbitmq" RABBITMQ_DIST_PORT="2569$i" \
		/usr/lib/rabbitmq/bin/rabbitmq-server >"$d/out.log" 2>&1 &)
done
for i in 1 2 3; do wait_port "559$i" || { echo "rabbitmq s$i did not start" >&2; exit 1; }; done
for i in 2 3; do
	rmqctl "s$i" stop_app >/dev/null && rmqctl "s$i" join_cluster s1@localhost >/dev/null && rmqctl "s$i" start_app >/dev/null
done
for i in 1 2 3; do wait_port "559$i"; done
sleep 3
rpids=""
for i in 1 2 3; do rpids="$rpids $(ss -ltnpH "sport = :559$i" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)"; done
echo "cluster: $(rmqctl s1 cluster_status --formatter json 2>/dev/null | jq -c '.running_nodes')"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for sc in $SCENARIOS; do
	IFS=, read -r name consumers body <<<"$sc"
	# shellcheck disable=SC2086
	perf_run rabbitmq 5591 "$name" "$consumers" "$body" 0 $rpids
done
