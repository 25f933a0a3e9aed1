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
# leaves RabbitMQ out, for trying a change.
#
# Warren: AMQP 5701..5703, stream 5721..5723, cluster 5711..5713.
# RabbitMQ: AMQP 5681..5683, stream 5591..5593, nodes s1..s3@localhost.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
DURATION=${DURATION:-20}
SCENARIOS=${SCENARIOS:-1KB-0c,0,992 1KB-1c,1,992 16B-1c,1,8}
work=$(mktemp -d)
chmod 755 "$work"
hz=$(getconf CLK_TCK)
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
mod=$(cd "$root" && go mod download -json github.com/rabbitmq/rabbitmq-stream-go-client@v1.8.3 | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
cp -r "$mod" "$work/client" && chmod -R u+w "$work/client"
sed -i 's/envOpts := stream.NewEnvironmentOptions()./envOpts := stream.NewEnvironmentOptions().SetReadBuffer(1 << 20).SetWriteBuffer(1 << 20)./' \
	"$work/client/perfTest/cmd/silent.go"
grep -q 'SetReadBuffer(1 << 20)' "$work/client/perfTest/cmd/silent.go" || { echo "perfTest: the socket buffer patch did not apply" >&2; exit 1; }
(cd "$work/client" && GOFLAGS=-mod=mod go build -o "$work/perf" ./perfTest)

ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo "$t"; }
wait_port() { for _ in $(seq 120); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 1; done; return 1; }

run() { # broker port scenario consumers body pids...
	local broker=$1 port=$2 scenario=$3 consumers=$4 body=$5
	shift 5
	local stream="bench3-$broker-$scenario-$RANDOM" t0 t1 line pub conf cons lat cpu
	t0=$(ticks "$@")
	line=$("$work/perf" --uris "rabbitmq-stream://guest:guest@localhost:$port/" --streams "$stream" \
		--publishers 1 --consumers "$consumers" --batch-size 100 --fixed-body "$body" --time "$DURATION" \
		--no-color 2>&1 | tee "$work/perf-$broker-$scenario.log" | grep "publish" | tail -1 || true)
	t1=$(ticks "$@")
	pub=$(sed -n 's/.*publish *\([0-9,.]*\) msg\/s.*/\1/p' <<<"$line" | tr -d ,)
	conf=$(sed -n 's/.*confirm *\([0-9,.]*\) msg\/s.*/\1/p' <<<"$line" | tr -d ,)
	cons=$(sed -n 's/.*consume *\([0-9,.]*\) msg\/s.*/\1/p' <<<"$line" | tr -d ,)
	lat=$(sed -n 's/.*latency *\([0-9,]*\) ms.*/\1/p' <<<"$line" | tr -d ,)
	cpu=$(awk -v t="$((t1 - t0))" -v hz="$hz" 'BEGIN{printf "%.1f", t/hz}')
	awk -v b="$broker" -v s="$scenario" -v p="$pub" -v c="$conf" -v k="$cons" -v l="$lat" -v cpu="$cpu" -v d="$DURATION" \
		'BEGIN{printf "%-8s %-8s published %9.0f  confirmed %9.0f  consumed %9.0f msg/s  latency %5s ms  cluster cpu %6.1f s  %7.1f us/msg\n",
			b, s, p, c, k, l, cpu, (p > 0 ? cpu * 1e6 / (p * d) : 0)}'
}

echo "--- Warren: three nodes"
for i in 1 2 3; do
	d=$work/w$i
	mkdir -p "$d"
	seeds=""
	[ "$i" -gt 1 ] && seeds='"127.0.0.1:5711"'
	printf '[admin]\nlisten = ""\n[stream]\nlisten = ["127.0.0.1:572%s"]\n[cluster]\nnode_name = "w%s"\nlisten = "127.0.0.1:571%s"\nseeds = [%s]\nsecret = "a secret of sixteen+"\n' \
		"$i" "$i" "$i" "$seeds" >"$d/broker.toml"
	"$work/warren" -config "$d/broker.toml" -listen "127.0.0.1:570$i" -data "$d/data" >"$d/log" 2>&1 &
	echo $! >"$d/pid"
	wait_port "572$i" || { echo "warren w$i did not start" >&2; tail "$d/log" >&2; exit 1; }
done
sleep 3
wpids=$(cat "$work"/w*/pid | tr '\n' ' ')
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for sc in $SCENARIOS; do
	IFS=, read -r name consumers body <<<"$sc"
	# shellcheck disable=SC2086
	run warren 5721 "$name" "$consumers" "$body" $wpids
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
	run rabbitmq 5591 "$name" "$consumers" "$body" $rpids
done
