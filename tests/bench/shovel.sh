#!/bin/sh
# Shovel throughput for BENCHMARKS.md, per ack mode: Warren -> Warren,
# RabbitMQ -> Warren (Warren's shovel) and RabbitMQ -> RabbitMQ
# (RabbitMQ 3.10.8's shovel plugin), each between two brokers on this
# machine, the shovel running on the destination's broker. Each run fills
# the source queue with N persistent messages of SIZE bytes, then times
# the shovel moving them (tests/bench/shovelperf), counting the CPU of
# both brokers. Run as root (RabbitMQ runs as the rabbitmq user):
#
#   N=100000 SIZE=1024 MODES="on-confirm on-publish no-ack" tests/bench/shovel.sh
#
# Ports: Warren 5701/5702 (admin 15701/15702), RabbitMQ 5711/5712
# (management 15712); everything under /tmp/shovelbench. The URIs name
# no vhost: RabbitMQ reads a path of "/" as the vhost "" (the default
# vhost is %2F), where amqp091-go and Warren read it as "/".
set -e
cd "$(dirname "$0")/../.."
N=${N:-100000}
SIZE=${SIZE:-1024}
MODES=${MODES:-on-confirm on-publish no-ack}
W=/tmp/shovelbench
rm -rf $W && mkdir -p $W
go build -o $W/warren ./cmd/warren
go build -o $W/shovelperf ./tests/bench/shovelperf

# settle_disk: see streamperf.sh (on this VM a page written for the first
# time costs kernel CPU unless memory was freed just before).
settle_disk() {
	[ "${SETTLE:-20}" != 0 ] || return 0
	sync
	echo 1 >/proc/sys/vm/drop_caches
	sleep "${SETTLE:-20}"
}

start_warren() { # i
	mkdir -p $W/w$1
	$W/warren -listen 127.0.0.1:570$1 -admin 127.0.0.1:1570$1 -stream 127.0.0.1:572$1 -data $W/w$1 >$W/w$1.log 2>&1 &
	echo $! >$W/w$1.pid
	for _ in $(seq 100); do grep -q "Warren started" $W/w$1.log && return; sleep 0.1; done
	echo "warren $1 did not start" >&2; exit 1
}

start_rabbit() { # i plugins
	d=$W/r$1
	mkdir -p $d/log $d/mnesia
	echo "[$2]." >$d/enabled_plugins
	printf 'listeners.tcp.default = 571%s\nmanagement.tcp.port = 1571%s\nmanagement.tcp.ip = 127.0.0.1\nloopback_users = none\n' $1 $1 >$d/rabbitmq.conf
	chown -R rabbitmq:rabbitmq $W/r$1
	chmod 755 $W
	(cd /var/lib/rabbitmq && env RABBITMQ_NODENAME=sb$1@localhost RABBITMQ_MNESIA_BASE=$d/mnesia \
		RABBITMQ_FEATURE_FLAGS_FILE=$d/feature_flags RABBITMQ_LOG_BASE=$d/log RABBITMQ_ENABLED_PLUGINS_FILE=$d/enabled_plugins \
		RABBITMQ_CONFIG_FILE=$d/rabbitmq RABBITMQ_DIST_PORT=2571$1 RABBITMQ_PID_FILE=$d/pid \
		su rabbitmq -s /bin/sh -c "/usr/lib/rabbitmq/bin/rabbitmq-server" >$d/out.log 2>&1 &)
	for _ in $(seq 300); do [ -s $d/pid ] && grep -q "completed with" $d/out.log && return; sleep 0.2; done
	echo "rabbitmq $1 did not start" >&2; exit 1
}

stop_all() {
	for f in $W/w1.pid $W/w2.pid $W/r1/pid $W/r2/pid; do [ -s "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
}
trap stop_all EXIT

start_warren 1
start_warren 2
start_rabbit 1 rabbitmq_management
start_rabbit 2 rabbitmq_management,rabbitmq_shovel,rabbitmq_shovel_management
WP="$(cat $W/w1.pid) $(cat $W/w2.pid)"
RP="$(cat $W/r1/pid) $(cat $W/r2/pid)"
WRP="$(cat $W/r1/pid) $(cat $W/w2.pid)"
w1=amqp://guest:guest@127.0.0.1:5701
w2=amqp://guest:guest@127.0.0.1:5702
r1=amqp://guest:guest@127.0.0.1:5711
r2=amqp://guest:guest@127.0.0.1:5712
echo "N=$N SIZE=$SIZE, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in $MODES; do
	settle_disk
	echo "--- Warren -> Warren, $mode"
	$W/shovelperf -src $w1 -dst $w2 -admin http://127.0.0.1:15702 -src-uri $w1 -ack-mode $mode -n $N -size $SIZE -pids "$WP"
	settle_disk
	echo "--- RabbitMQ -> Warren, $mode"
	$W/shovelperf -src $r1 -dst $w2 -admin http://127.0.0.1:15702 -src-uri $r1 -ack-mode $mode -n $N -size $SIZE -pids "$WRP"
	settle_disk
	echo "--- RabbitMQ -> RabbitMQ, $mode"
	$W/shovelperf -src $r1 -dst $r2 -admin http://127.0.0.1:15712 -src-uri $r1 -ack-mode $mode -n $N -size $SIZE -pids "$RP"
done
