# Shared by streamproto.sh and streamproto3.sh (sourced, not run): the Go
# stream client's perfTest, built with 1 MiB socket buffers (the client's
# 8 KiB default leaves either broker waiting on the receive window), and
# one perfTest run with the brokers' CPU summed. They set work, root,
# DURATION.

# build_perf builds perfTest from rabbitmq-stream-go-client v1.8.3 into
# $work/perf.
build_perf() {
	local mod
	mod=$(cd "$root" && go mod download -json github.com/rabbitmq/rabbitmq-stream-go-client@v1.8.3 | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
	cp -r "$mod" "$work/client" && chmod -R u+w "$work/client"
	sed -i 's/envOpts := stream.NewEnvironmentOptions()./envOpts := stream.NewEnvironmentOptions().SetReadBuffer(1 << 20).SetWriteBuffer(1 << 20)./' \
		"$work/client/perfTest/cmd/silent.go"
	grep -q 'SetReadBuffer(1 << 20)' "$work/client/perfTest/cmd/silent.go" ||
		{ echo "perfTest: the socket buffer patch did not apply" >&2; return 1; }
	(cd "$work/client" && GOFLAGS=-mod=mod go build -o "$work/perf" ./perfTest)
}

# ticks is the CPU ticks the processes pids have used.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo "$t"; }

# settle_disk starts every run from the same state of the machine's
# memory: nothing left to write back, and no page freed recently. On this
# VM a page of the page cache costs about 9 us of kernel CPU per KiB the
# first time it is written, unless it reuses memory freed in the last few
# seconds (after that the host has it back): dd writing 3 GiB took 27 s
# of system time, 3.3 s right after 3 GiB were deleted, 31 s again 30 s
# after. A run that happened to start just after files were deleted (the
# last script's work directory, the caches dropped) wrote its streams at
# a fraction of the cost, so whichever broker and scenario came first
# looked up to twice as cheap. So: write back, drop the clean cache, and
# wait SETTLE seconds (45 by default; 0 skips it all) for the host to take
# the freed pages back.
settle_disk() {
	[ "${SETTLE:-45}" != 0 ] || return 0
	sync
	echo 1 >/proc/sys/vm/drop_caches
	sleep "${SETTLE:-45}"
}

# perf_run runs perfTest for DURATION seconds, one publisher in batches of
# 100, against the broker on localhost:port, and prints the rates it
# reports with the CPU of pids per message published:
#
#   perf_run broker port scenario consumers body rate pid...
perf_run() {
	local broker=$1 port=$2 scenario=$3 consumers=$4 body=$5 rate=$6
	shift 6
	local stream="bench-$broker-$scenario-$RANDOM" hz t0 t1 line pub conf cons lat cpu
	hz=$(getconf CLK_TCK)
	settle_disk
	t0=$(ticks "$@")
	line=$("$work/perf" --uris "rabbitmq-stream://guest:guest@localhost:$port/" --streams "$stream" \
		--publishers 1 --consumers "$consumers" --batch-size 100 --fixed-body "$body" --rate "$rate" --time "$DURATION" \
		--no-color 2>&1 | tee "$work/perf-$broker-$scenario.log" | grep "publish" | tail -1 || true)
	t1=$(ticks "$@")
	pub=$(sed -n 's/.*publish *\([0-9,.]*\) msg\/s.*/\1/p' <<<"$line" | tr -d ,)
	conf=$(sed -n 's/.*confirm *\([0-9,.]*\) msg\/s.*/\1/p' <<<"$line" | tr -d ,)
	cons=$(sed -n 's/.*consume *\([0-9,.]*\) msg\/s.*/\1/p' <<<"$line" | tr -d ,)
	lat=$(sed -n 's/.*latency *\([0-9,]*\) ms.*/\1/p' <<<"$line" | tr -d ,)
	cpu=$(awk -v t="$((t1 - t0))" -v hz="$hz" 'BEGIN{printf "%.1f", t/hz}')
	awk -v b="$broker" -v s="$scenario" -v p="$pub" -v c="$conf" -v k="$cons" -v l="$lat" -v cpu="$cpu" -v d="$DURATION" \
		'BEGIN{printf "%-8s %-14s published %9.0f  confirmed %9.0f  consumed %9.0f msg/s  latency %5s ms  cpu %6.1f s  %7.1f us/msg\n",
			b, s, p, c, k, l, cpu, (p > 0 ? cpu * 1e6 / (p * d) : 0)}'
}

# drain_run fills a stream for DURATION seconds with one publisher
# (batches of 100), then has consumers read it from first for DURATION
# seconds with no publisher, and prints the consumed rate with the CPU of
# pids per message consumed: what delivery costs when nothing else
# competes for the two cores.
#
#   drain_run broker port scenario consumers body pid...
drain_run() {
	local broker=$1 port=$2 scenario=$3 consumers=$4 body=$5
	shift 5
	local stream="drain-$broker-$scenario-$RANDOM" hz t0 t1 line cons cpu
	hz=$(getconf CLK_TCK)
	"$work/perf" --uris "rabbitmq-stream://guest:guest@localhost:$port/" --streams "$stream" \
		--publishers 1 --consumers 0 --batch-size 100 --fixed-body "$body" --time "$DURATION" --no-color >/dev/null 2>&1 || true
	t0=$(ticks "$@")
	line=$("$work/perf" --uris "rabbitmq-stream://guest:guest@localhost:$port/" --streams "$stream" \
		--publishers 0 --consumers "$consumers" --time "$DURATION" --no-color 2>&1 |
		tee "$work/drain-$broker-$scenario.log" | grep "consume" | tail -1 || true)
	t1=$(ticks "$@")
	cons=$(sed -n 's/.*consume *\([0-9,.]*\) msg\/s.*/\1/p' <<<"$line" | tr -d ,)
	cpu=$(awk -v t="$((t1 - t0))" -v hz="$hz" 'BEGIN{printf "%.1f", t/hz}')
	awk -v b="$broker" -v s="$scenario" -v k="$cons" -v cpu="$cpu" -v d="$DURATION" \
		'BEGIN{printf "%-8s %-14s drained   %9.0f msg/s  cpu %6.1f s  %7.2f us/msg\n", b, s, k, cpu, (k > 0 ? cpu * 1e6 / (k * d) : 0)}'
}
