#!/usr/bin/env bash
# Compares two revisions of Warren under the same warrenperf load, one
# broker at a time, alternating old and new so that drift in the machine's
# speed falls on both alike.
#
#   tests/bench/ab.sh OLD_REV [NEW_REV]
#   ROUNDS=6 DURATION=20s SCENARIOS="transient persistent" tests/bench/ab.sh 19b9957
#
# NEW_REV defaults to the work tree. OLD_ARGS and NEW_ARGS are extra
# arguments for each broker: the same revision twice with NEW_ARGS="-config
# cluster.toml" compares a node with and without [cluster]. The load tool
# is always the work tree's warrenperf, so both brokers see the same client. Each line gives
# the consumed rate, the broker's CPU per message (from /proc) and the
# median and p99 latency from publish to delivery. Scenarios: transient,
# persistent, persistent1k, fanout (10 queues), topic10k, headers1k,
# latency (1,000 msg/s, manual acks), quorum (a quorum queue, 100
# confirms in flight) and stream (10 consumers from first; consumed
# counts every consumer's deliveries). At the end it prints each
# scenario's medians over the rounds, and the median of the rounds' own
# new/old rates.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
old_rev=${1:?usage: ab.sh OLD_REV [NEW_REV]}
new_rev=${2:-}
rounds=${ROUNDS:-3}
duration=${DURATION:-20s}
scenarios=${SCENARIOS:-transient persistent}
work=$(mktemp -d)
cleanup() {
	kill "$(cat "$work/pid" 2>/dev/null)" 2>/dev/null || true
	for wt in "$work"/src-*; do [ -d "$wt" ] && git -C "$root" worktree remove --force "$wt"; done
	rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=revs.sh
. "$root/tests/bench/revs.sh"
build_revs "$old_rev" "$new_rev"
(cd "$root" && go build -o "$work/warrenperf" ./cmd/warrenperf)

run_one() { # label scenario
	local label=$1 scenario=$2 addr="" args extra
	rm -rf "$work/data"
	if [ "$label" = old ]; then extra=${OLD_ARGS:-}; else extra=${NEW_ARGS:-}; fi
	# shellcheck disable=SC2086
	"$work/$label" -listen 127.0.0.1:0 -data "$work/data" $extra >"$work/log" 2>&1 &
	echo $! >"$work/pid"
	for _ in $(seq 200); do
		addr=$(sed -n 's/.*"listener":"amqp","addr":"\([^"]*\)".*/\1/p' "$work/log" | head -1)
		[ -n "$addr" ] && break
		sleep 0.05
	done
	case $scenario in
	transient) args="-size 16 -autoack -queue ab.t" ;;
	persistent) args="-size 16 -persistent -durable -confirm 256 -qos 256 -queue ab.p" ;;
	persistent1k) args="-size 1024 -persistent -durable -confirm 256 -qos 256 -queue ab.p1" ;;
	fanout) args="-size 16 -autoack -exchange ab.f -exchange-type fanout -queues 10 -consumers 10 -queue ab.f" ;;
	topic10k) args="-size 16 -autoack -exchange ab.t10k -exchange-type topic -key stock.ibm.nyse -extra-bindings 10000 -queue ab.t10k" ;;
	headers1k) args="-size 16 -autoack -exchange ab.h1k -exchange-type headers -key ibm -extra-bindings 1000 -queue ab.h1k" ;;
	latency) args="-size 16 -rate 1000 -qos 100 -queue ab.l" ;;
	quorum) args="-size 16 -persistent -confirm 100 -qos 1000 -queue ab.qq -queue-type quorum" ;;
	stream) args="-size 16 -persistent -confirm 100 -qos 1000 -consumers 10 -queue ab.s -queue-type stream -stream-offset first" ;;
	*) echo "unknown scenario $scenario" >&2; exit 2 ;;
	esac
	# shellcheck disable=SC2086
	summary=$("$work/warrenperf" -url "amqp://guest:guest@$addr/" -broker-pid "$(cat "$work/pid")" -duration "$duration" $args | grep '^summary' | tr '\n' ' ')
	rate=$(echo "$summary" | sed -n 's/.*consumed [0-9]* = \([0-9]*\) msg\/s.*/\1/p')
	cpu=$(echo "$summary" | sed -n 's/.*broker CPU [0-9.]*s = \([0-9.]*\) µs per message.*/\1/p')
	latency=$(echo "$summary" | sed -n 's/.*summary: latency median \([^ ]*\) p95 [^ ]* p99 \([^ ]*\) .*/\1 \2/p')
	echo "$scenario $label consumed/s=$rate cpu_us/msg=$cpu latency_p50_p99=${latency// /,}"
	kill "$(cat "$work/pid")"
	while kill -0 "$(cat "$work/pid")" 2>/dev/null; do sleep 0.05; done
}

for _ in $(seq "$rounds"); do
	for scenario in $scenarios; do
		run_one old "$scenario" | tee -a "$work/lines"
		run_one new "$scenario" | tee -a "$work/lines"
	done
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { grep "^$1 $2 " "$work/lines" | sed -n "s|.* $3=\([0-9.]*\).*|\1|p"; } # scenario label name
# The spread between runs is wide, so the rounds' medians, and the median
# of each round's own new/old ratio, which drift in the machine's speed
# affects less than the medians apart.
echo "medians of $rounds rounds:"
for scenario in $scenarios; do
	ratio=$(paste <(field "$scenario" old consumed/s) <(field "$scenario" new consumed/s) | awk '{ printf "%.4f\n", $2 / $1 }' | median)
	echo "$scenario old consumed/s=$(field "$scenario" old consumed/s | median) cpu_us/msg=$(field "$scenario" old cpu_us/msg | median)" \
		"new consumed/s=$(field "$scenario" new consumed/s | median) cpu_us/msg=$(field "$scenario" new cpu_us/msg | median) new/old rate by round=$ratio"
done
