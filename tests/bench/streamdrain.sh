#!/usr/bin/env bash
# A/B of stream-protocol delivery alone: two revisions of Warren, one
# broker at a time, alternating. Each run fills a stream with perfTest
# (rabbitmq-stream-go-client v1.8.3's load tool; one publisher, batches
# of 100) for DURATION seconds, then drains it from first with CONSUMERS
# consumers for DURATION seconds with no publisher, and prints the
# consumed rate and the broker's CPU over the drain per message consumed
# (perfTest's average rate times DURATION, as streamperf.sh's drain_run
# counts).
#
#   tests/bench/streamdrain.sh OLD_REV [NEW_REV]
#   ROUNDS=2 DURATION=8 RUNS="1,1000 10,1000 1,16" tests/bench/streamdrain.sh 1aab351
#
# RUNS are "consumers,body" pairs. NEW_REV defaults to the work tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
old_rev=${1:?usage: streamdrain.sh OLD_REV [NEW_REV]}
new_rev=${2:-}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-8}
RUNS=${RUNS:-1,1000 10,1000 1,16}
work=$(mktemp -d)
cleanup() {
	[ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true
	for wt in "$work"/src-*; do [ -d "$wt" ] && git -C "$root" worktree remove --force "$wt"; done
	rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=streamperf.sh
. "$root/tests/bench/streamperf.sh"
# shellcheck source=revs.sh
. "$root/tests/bench/revs.sh"
build_revs "$old_rev" "$new_rev"
build_perf
hz=$(getconf CLK_TCK)
uri="rabbitmq-stream://guest:guest@localhost:5596/"
start() { # label
	rm -rf "$work/data"
	"$work/$1" -listen 127.0.0.1:5696 -stream 127.0.0.1:5596 -admin off -data "$work/data" >"$work/log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do grep -q '"listener":"stream"' "$work/log" && break; sleep 0.05; done
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
rate() { sed -n "s/.*$1 *\([0-9,.]*\) msg\/s.*/\1/p" | tail -1 | tr -d ,; }
for round in $(seq "$ROUNDS"); do
	for label in old new; do
		for run in $RUNS; do
			consumers=${run%,*} body=${run#*,}
			start "$label"
			"$work/perf" --uris "$uri" --streams d --publishers 1 --consumers 0 --batch-size 100 --fixed-body "$body" --time "$DURATION" --no-color >/dev/null 2>&1 || true
			t1=$(ticks "$pid")
			cons=$("$work/perf" --uris "$uri" --streams d --publishers 0 --consumers "$consumers" --time "$DURATION" --no-color 2>&1 | grep consume | rate consume)
			t2=$(ticks "$pid")
			stop
			awk -v r="$round" -v l="$label" -v c="$consumers" -v b="$body" -v k="$cons" -v tc=$((t2 - t1)) -v hz="$hz" -v d="$DURATION" 'BEGIN{
				printf "round %s %-3s %2d consumer(s) %5d B: drained %8.0f msg/s, %.2f us/msg\n", r, l, c, b, k, (k > 0 ? tc / hz * 1e6 / (k * d) : 0)}'
		done
	done
done
