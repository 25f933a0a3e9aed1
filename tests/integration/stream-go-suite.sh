#!/usr/bin/env bash
# Runs the Ginkgo test suites that ship in
# github.com/rabbitmq/rabbitmq-stream-go-client (pkg/stream, pkg/ha,
# pkg/integration_test), and the examples that ship with the Node stream
# client (rabbitmq-stream-js-client, from npm), against a broker and
# prints one line per spec (an example is a spec "js/example/FILE:1"):
#
#   PASS pkg/stream/environment_test.go:175 Environment test ... Connection Vhost not exist
#   FAIL pkg/...:N <full spec text>          (then indented failure details)
#   SKIP pkg/...:N <full spec text> -- reason
#   passed N, failed N, skipped N
#
# Usage (as root: it needs unshare(1) for a network namespace):
#
#   tests/integration/stream-go-suite.sh -warren   [options]
#   tests/integration/stream-go-suite.sh -rabbitmq [options]
#   tests/integration/stream-go-suite.sh -compare BASELINE -results FILE
#
# The suites hard-code localhost:5552 (stream protocol) and localhost:15672
# (management HTTP API), so the broker and the tests run together in a fresh
# network namespace of their own (unshare --net): the host's real ports are
# never touched and several runs can coexist.
#
#   -warren           build ./cmd/warren from this repository and run it with
#                     a generated broker.toml: AMQP 127.0.0.1:5672, admin
#                     127.0.0.1:15672, and the stream listener from
#                     $WARREN_STREAM_TOML (default: [stream] listen =
#                     "127.0.0.1:5552"; adjust it once the setting exists).
#   -warren-config F  use broker.toml F instead of the generated one (its
#                     storage.data_dir is overridden with -data).
#   -warren-bin F     use a prebuilt warren binary instead of building one.
#   -rabbitmq         start a private RabbitMQ node (the Debian
#                     rabbitmq-server package, 3.10.8) with rabbitmq_stream,
#                     rabbitmq_stream_management and rabbitmq_management.
#   -v VERSION        client version (default v1.8.3; the baseline file is
#                     for v1.8.3).
#   -compare FILE     after the run, print the specs whose result differs
#                     from FILE (a saved run, e.g.
#                     stream-go-suite.rabbitmq-3.10.8.txt, or Warren's own,
#                     stream-go-suite.warren.txt, which CI uses) and exit 1 if a
#                     spec that passes there does not pass here. A spec
#                     that fails here and passes there is run once more
#                     (against a fresh broker) before that is decided:
#                     some specs are timing-bound whatever the broker (the
#                     Reliable Producer's "Delete the stream should close
#                     the producer" waits twice a random 3-11 s under a
#                     20 s timeout, and failed 1 run in 20 against either).
#                     A spec that passes the second time is reported PASS,
#                     its first failure kept in the result file as a note.
#   -results FILE     with -compare and no broker mode: compare FILE (a
#                     saved run) instead of running anything.
#   -o FILE           also write the result lines to FILE.
#   -focus REGEX      run only specs whose "location text" matches REGEX
#                     (grep -E), for working on a few specs.
#   -skip FILE        skip the specs listed in FILE, one per line:
#                     "pkg/x/y_test.go:LINE reason..." (# starts a comment).
#                     The list in SKIP_BUILTIN below is always applied.
#   -spec-timeout S   seconds one spec may take (default 240).
#   -total-timeout S  seconds the whole run may take (default 2700).
#   -keep             keep the work directory (logs, JSON reports).
#   -js VERSION       the Node client's version (default 1.0.0); "" leaves
#                     its examples out. They need node and npm; each runs
#                     as it ships (they connect to localhost:5552, some as
#                     user rabbit, which the run creates) and passes when
#                     it exits 0 having printed what JS_EXAMPLES says.
#
# Each spec runs in its own test process (ginkgo -focus-file FILE:LINE), so
# a spec that hangs or leaves connections behind cannot take the rest of
# the suite with it; each process creates and deletes the suite's vhost
# (SynchronizedBeforeSuite/AfterSuite in pkg/stream), as a whole-suite run
# does once. A spec whose suite-level hooks fail is reported FAIL.
#
# Exit status: 0 when the run completed (whatever the specs did) or, with
# -compare, when nothing that passes in the baseline fails; 1 on a
# regression against the baseline; 2 on bad usage; 3 when the suite could
# not be built, the broker did not start, or the run ended early
# (-total-timeout, or fewer results than specs).
set -euo pipefail

# Specs skipped in every run: "location reason". Keep the reason short; it
# is printed on the SKIP line.
SKIP_BUILTIN=$(cat <<'EOF'
EOF
)

# The Node client's examples that run against one broker: "file<TAB>a
# line it prints when it worked" (autoreconnect_example.js and
# cluster_example.js need a cluster of containers).
JS_EXAMPLES=$(cat <<'EOF'
index.js	Received message Test message
src/deduplication_example.js	Publishing id is 7 (must be 7)
src/offset_tracking_example.js	Done consuming, first offset was 0, last offset was 99
src/offset_tracking_send.js	Publishing 100 messages
src/offset_tracking_receive.js	Marker found
src/single_active_consumer_update_example.js	Messages consumed by the second consumer: 51
src/superstream_example.js	Received message Test message 3
EOF
)

# The stream listener Warren is asked for (appended to the generated
# broker.toml). Change it here or in the environment once
# core/streamproto's setting is settled.
WARREN_STREAM_TOML=${WARREN_STREAM_TOML:-'[stream]
listen = "127.0.0.1:5552"'}

RMQ_NODE=streamref@localhost

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# ---------------------------------------------------------------------------
# Comparison of two result files: keyed on the spec's location (field 2).
compare() { # baseline current
	awk '
	FNR == 1 { f++ }
	$1 ~ /^(PASS|FAIL|SKIP)$/ && $2 ~ /:[0-9]+$/ {
		line = $0; sub(/^[A-Z]+ [^ ]+ /, "", line); sub(/ -- .*$/, "", line)
		if (f == 1) { base[$2] = $1; text[$2] = line } else { cur[$2] = $1; text[$2] = line; order[++n] = $2 }
	}
	END {
		bad = 0
		for (i = 1; i <= n; i++) {
			k = order[i]; b = (k in base) ? base[k] : "NEW"; c = cur[k]
			if (b == c) continue
			tag = "CHANGED"
			if (b == "PASS" && c == "FAIL") { tag = "REGRESSION"; bad++ }
			else if (b == "PASS" && c == "SKIP") tag = "SKIPPED"
			else if (c == "PASS") tag = "IMPROVED"
			printf "%-10s %s -> %s %s %s\n", tag, b, c, k, text[k]
		}
		for (k in base) if (!(k in cur)) printf "%-10s %s -> NOT RUN %s %s\n", "MISSING", base[k], k, text[k]
		printf "compared with the baseline: %d spec(s) that pass there fail here\n", bad
		exit bad > 0
	}' "$1" "$2"
}

# ---------------------------------------------------------------------------
# Inner stage: runs inside the network namespace. Arguments: work directory
# and mode. Everything it needs was built by the outer stage.
inner() {
	local work=$1 mode=$2
	pid="" # global: the EXIT trap runs after inner has returned
	cleanup_inner() {
		local status=$?
		set +e
		if [ "$mode" = rabbitmq ]; then
			timeout 60 runuser -u rabbitmq -- env HOME="$work/rabbitmq" \
				/usr/lib/rabbitmq/bin/rabbitmqctl -n "$RMQ_NODE" stop >>"$work/rabbitmq/stop.log" 2>&1
			[ -z "$pid" ] || timeout 30 tail --pid="$pid" -f /dev/null 2>/dev/null
		elif [ -n "$pid" ]; then
			kill "$pid" 2>/dev/null
			timeout 20 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -9 "$pid" 2>/dev/null
		fi
		# Whatever we started that is still in this namespace (epmd, a
		# broker that did not stop, a test process): end it by its id.
		local me ns p
		me=$(readlink /proc/$$/ns/net)
		for p in /proc/[0-9]*; do
			p=${p#/proc/}
			[ "$p" = $$ ] && continue
			ns=$(readlink "/proc/$p/ns/net" 2>/dev/null) || continue
			[ "$ns" = "$me" ] && kill -9 "$p" 2>/dev/null
		done
		exit $status
	}
	trap cleanup_inner EXIT
	trap 'exit 143' TERM INT

	ip link set lo up
	# No "Killed" notices from the shell when the cleanup ends the broker.
	set +m

	case "$mode" in
	warren)
		"$work/warren" -config "$work/broker.toml" -data "$work/data" >"$work/broker.log" 2>&1 &
		pid=$!
		;;
	rabbitmq)
		local r=$work/rabbitmq
		(cd "$r" && exec runuser -u rabbitmq -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			HOME="$r" LANG=C.UTF-8 LC_ALL=C.UTF-8 \
			RABBITMQ_NODENAME="$RMQ_NODE" \
			RABBITMQ_MNESIA_BASE="$r/mnesia" RABBITMQ_LOG_BASE="$r/log" \
			RABBITMQ_ENABLED_PLUGINS_FILE="$r/enabled_plugins" \
			RABBITMQ_CONFIG_FILE="$r/rabbitmq.conf" \
			RABBITMQ_ADVANCED_CONFIG_FILE="$r/advanced.config" \
			RABBITMQ_CONF_ENV_FILE="$r/rabbitmq-env.conf" \
			RABBITMQ_PID_FILE="$r/rabbit.pid" \
			/usr/lib/rabbitmq/bin/rabbitmq-server) >"$work/broker.log" 2>&1 &
		pid=$!
		;;
	esac

	# Ready: the management API answers and the stream port accepts.
	local ok="" i
	for i in $(seq 240); do
		if curl -sf -m 2 -u guest:guest -o /dev/null http://127.0.0.1:15672/api/overview &&
			timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/5552' 2>/dev/null; then
			ok=1; break
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	if [ -z "$ok" ]; then
		echo "the broker did not start (management on 127.0.0.1:15672 and stream on 127.0.0.1:5552 within 120s):" >&2
		tail -n 40 "$work/broker.log" >&2
		if [ "$mode" = rabbitmq ]; then tail -n 40 "$work"/rabbitmq/log/*.log >&2 2>/dev/null || true; fi
		exit 3
	fi

	# The user the Node client's examples log in as.
	curl -sf -m 5 -u guest:guest -X PUT -H 'content-type: application/json' \
		-d '{"password":"rabbit","tags":"administrator"}' http://127.0.0.1:15672/api/users/rabbit >/dev/null &&
		curl -sf -m 5 -u guest:guest -X PUT -H 'content-type: application/json' \
			-d '{"configure":".*","write":".*","read":".*"}' http://127.0.0.1:15672/api/permissions/%2F/rabbit >/dev/null ||
		echo "could not create user rabbit for the Node client's examples" >&2

	local loc pkg bin file line text rep out ginkgo_to status
	ginkgo_to=$((spec_timeout - 20))
	[ "$ginkgo_to" -ge 10 ] || ginkgo_to=10
	while IFS=$'\t' read -r loc pkg bin file line text; do
		local reason
		reason=$(awk -v l="$loc" '$1 == l { $1 = ""; sub(/^ /, ""); print; exit }' "$work/skip.list")
		if [ -n "$reason" ]; then
			echo "SKIP $loc $text -- $reason"
			continue
		fi
		rep=$work/reports/${loc//\//_}.json
		out=$work/reports/${loc//\//_}.log
		if [ "$pkg" = js ]; then
			js_verdict "$loc" "$file" "$text" "$out"
			continue
		fi
		(cd "$work/suite/$pkg" && timeout -k 10 "$spec_timeout" "$work/bin/$bin" \
			"-ginkgo.focus-file=^$file\$:$line" -ginkgo.no-color -ginkgo.v \
			"-ginkgo.timeout=${ginkgo_to}s" -ginkgo.grace-period=10s \
			"-ginkgo.json-report=$rep" -test.count=1) >"$out" 2>&1 &
		# In the background, so that a TERM from -total-timeout is
		# handled (and the broker stopped) at once.
		wait $! && status=0 || status=$?
		verdict "$loc" "$file" "$line" "$text" "$rep" "$out" "$status" || true
	done <"$work/specs.tsv"
}

# Runs one of the Node client's examples and prints its result line.
js_verdict() {
	local loc=$1 file=$2 text=$3 out=$4 want status
	want=$(awk -F'\t' -v f="$file" '$1 == f { print $2; exit }' <<<"$JS_EXAMPLES")
	(cd "$work/js/example" && RABBITMQ_USER=rabbit RABBITMQ_PASSWORD=rabbit \
		timeout -k 10 60 node "$file") >"$out" 2>&1 &
	wait $! && status=0 || status=$?
	if [ "$status" = 0 ] && grep -qF -- "$want" "$out"; then
		echo "PASS $loc $text"
	else
		echo "FAIL $loc $text"
		echo "    exit $status; expected the line: $want"
		grep -v '^\s*$' "$out" | tail -n 10 | sed 's/^/    /'
	fi
}

# One result line (plus details for a failure) from a spec's JSON report.
verdict() {
	local loc=$1 file=$2 line=$3 text=$4 rep=$5 out=$6 status=$7
	local it="" hooks=""
	if [ -s "$rep" ]; then
		it=$(jq -r --arg f "$file" --argjson l "$line" '.[0].SpecReports[]
			| select(.LeafNodeType == "It" and .LeafNodeLocation.FileName == $f and .LeafNodeLocation.LineNumber == $l)
			| .State' "$rep" 2>/dev/null | head -1)
		hooks=$(jq -r '.[0].SpecReports[] | select(.LeafNodeType != "It" and .State != "passed")
			| "\(.LeafNodeType) \(.State): \(.Failure.Message // "" | gsub("\n"; " ") | .[0:300])"' "$rep" 2>/dev/null)
	fi
	case "$it" in
	passed)
		if [ -z "$hooks" ]; then
			echo "PASS $loc $text"
		else
			echo "FAIL $loc $text"
			sed 's/^/    /' <<<"$hooks"
		fi
		;;
	pending)
		echo "SKIP $loc $text -- pending in the suite"
		;;
	skipped)
		if [ -z "$hooks" ]; then
			echo "SKIP $loc $text -- skipped by the suite"
		else
			echo "FAIL $loc $text"
			sed 's/^/    (not run) /' <<<"$hooks"
		fi
		;;
	"")
		echo "FAIL $loc $text"
		if [ "$status" = 124 ] || [ "$status" = 137 ]; then
			echo "    killed after ${spec_timeout}s (-spec-timeout)"
		else
			echo "    no report from the test process (exit $status):"
		fi
		grep -v '^\s*$' "$out" | tail -n 15 | sed 's/^/    /'
		;;
	*)
		echo "FAIL $loc $text"
		jq -r --arg f "$file" --argjson l "$line" '.[0].SpecReports[]
			| select(.LeafNodeType == "It" and .LeafNodeLocation.FileName == $f and .LeafNodeLocation.LineNumber == $l)
			| "\(.State) at \(.Failure.Location.FileName // "?" | sub(".*/suite/"; "")):\(.Failure.Location.LineNumber // "?")",
			  (.Failure.Message // "" | split("\n") | map(select(length > 0)) | .[0:6][]),
			  (.Failure.ForwardedPanic // empty | "panic: \(.)")' "$rep" |
			sed 's/^/    /'
		if [ -n "$hooks" ]; then sed 's/^/    /' <<<"$hooks"; fi
		;;
	esac
}

# ---------------------------------------------------------------------------
if [ "${1:-}" = "--inner" ]; then
	shift
	work=$1 mode=$2 spec_timeout=$3
	inner "$work" "$mode"
	exit 0
fi

js_version=1.0.0
mode="" version=v1.8.3 compare_file="" results_file="" out_file="" focus=""
skip_file="" spec_timeout=240 total_timeout=2700 keep="" warren_config="" warren_bin=""
while [ $# -gt 0 ]; do
	case "$1" in
	-warren) mode=warren; shift ;;
	-rabbitmq) mode=rabbitmq; shift ;;
	-warren-config) warren_config=$(realpath "$2"); shift 2 ;;
	-warren-bin) warren_bin=$(realpath "$2"); shift 2 ;;
	-v) version=$2; shift 2 ;;
	-compare) compare_file=$(realpath "$2"); shift 2 ;;
	-results) results_file=$(realpath "$2"); shift 2 ;;
	-o) out_file=$2; shift 2 ;;
	-focus) focus=$2; shift 2 ;;
	-skip) skip_file=$(realpath "$2"); shift 2 ;;
	-spec-timeout) spec_timeout=$2; shift 2 ;;
	-total-timeout) total_timeout=$2; shift 2 ;;
	-keep) keep=1; shift ;;
	-js) js_version=$2; shift 2 ;;
	*) usage ;;
	esac
done

if [ -z "$mode" ]; then
	[ -n "$compare_file" ] && [ -n "$results_file" ] || usage
	compare "$compare_file" "$results_file"
	exit $?
fi
[ -z "$results_file" ] || usage
[ "$(id -u)" = 0 ] || { echo "$0: needs root (unshare --net, and runuser for RabbitMQ)" >&2; exit 2; }
for tool in go jq curl unshare ip timeout; do
	command -v "$tool" >/dev/null || { echo "$0: needs $tool" >&2; exit 3; }
done

root=$(cd "$(dirname "$0")/../.." && pwd)
self=$(realpath "$0")
work=$(mktemp -d /tmp/stream-go-suite.XXXXXX)
chmod 755 "$work"
if [ -n "$keep" ]; then
	trap 'echo "work directory kept: $work" >&2' EXIT
else
	trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/bin" "$work/reports"
start=$(date +%s)

# The module, copied out of the module cache so it can be built in place.
# Everything is built here, before the namespace, which has no network.
mod=$(cd "$root" && go mod download -json "github.com/rabbitmq/rabbitmq-stream-go-client@$version" |
	sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
[ -n "$mod" ] || { echo "go mod download found no module directory" >&2; exit 3; }
cp -r "$mod" "$work/suite" && chmod -R u+w "$work/suite"
(
	cd "$work/suite"
	go mod download
	for pkg in stream ha integration_test; do
		go test -p 1 -c -o "$work/bin/$pkg.test" "./pkg/$pkg"
	done
) >"$work/build.log" 2>&1 || { echo "building the suite failed:" >&2; tail -n 30 "$work/build.log" >&2; exit 3; }

# The spec list, from a dry run of each suite: one line per spec,
# location, package, binary, file, line, full text.
for pkg in stream ha integration_test; do
	(cd "$work/suite/pkg/$pkg" && timeout 60 "$work/bin/$pkg.test" -ginkgo.dry-run -ginkgo.no-color \
		"-ginkgo.json-report=$work/dry-$pkg.json" >/dev/null 2>&1) ||
		{ echo "listing the specs of pkg/$pkg failed" >&2; exit 3; }
	jq -r --arg pkg "pkg/$pkg" --arg bin "$pkg.test" '.[0].SpecReports[] | select(.LeafNodeType == "It")
		| (.LeafNodeLocation.FileName | sub(".*/suite/"; "")) as $rel
		| [ "\($rel):\(.LeafNodeLocation.LineNumber)", $pkg, $bin, .LeafNodeLocation.FileName,
		    (.LeafNodeLocation.LineNumber | tostring),
		    ((.ContainerHierarchyTexts // []) + [.LeafNodeText] | join(" ") | gsub("[\t\n]"; " ")) ]
		| @tsv' "$work/dry-$pkg.json"
done | sort -t "$(printf '\t')" -k2,2 -k4,4 -k5,5n >"$work/specs.all.tsv" # in source order
# The Node client and its examples, installed from npm (before the
# namespace, which has no network); one spec line per example.
if [ -n "$js_version" ]; then
	for tool in node npm; do
		command -v "$tool" >/dev/null ||
			{ echo "$0: needs $tool for the Node client's examples (-js \"\" leaves them out)" >&2; exit 3; }
	done
	(
		mkdir -p "$work/js" && cd "$work/js" &&
			npm install --silent --no-save "rabbitmq-stream-js-client@$js_version" &&
			cp -r node_modules/rabbitmq-stream-js-client/example example && cd example &&
			npm pkg set "dependencies.rabbitmq-stream-js-client=$js_version" && npm install --silent
	) >"$work/build-js.log" 2>&1 ||
		{ echo "installing the Node client failed:" >&2; tail -n 30 "$work/build-js.log" >&2; exit 3; }
	while IFS=$'\t' read -r file _; do
		printf 'js/example/%s:1\tjs\tnode\t%s\t1\tNode stream client %s example %s\n' "$file" "$file" "$js_version" "$file"
	done <<<"$JS_EXAMPLES" >>"$work/specs.all.tsv"
fi
if [ -n "$focus" ]; then
	awk -F'\t' -v re="$focus" '($1 " " $6) ~ re' "$work/specs.all.tsv" >"$work/specs.tsv"
else
	cp "$work/specs.all.tsv" "$work/specs.tsv"
fi
{
	printf '%s\n' "$SKIP_BUILTIN"
	[ -z "$skip_file" ] || cat "$skip_file"
} | sed 's/#.*//' | awk 'NF' >"$work/skip.list"

case "$mode" in
warren)
	if [ -n "$warren_bin" ]; then
		cp "$warren_bin" "$work/warren"
	else
		(cd "$root" && go build -o "$work/warren" ./cmd/warren) >"$work/build-warren.log" 2>&1 ||
			{ echo "building warren failed:" >&2; tail -n 30 "$work/build-warren.log" >&2; exit 3; }
	fi
	if [ -n "$warren_config" ]; then
		cp "$warren_config" "$work/broker.toml"
	else
		cat >"$work/broker.toml" <<-EOF
			[log]
			format = "json"
			[amqp]
			listen = "127.0.0.1:5672"
			[admin]
			listen = "127.0.0.1:15672"
			[storage]
			data_dir = "$work/data"
			sync = "never"

			$WARREN_STREAM_TOML
		EOF
	fi
	;;
rabbitmq)
	[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] ||
		{ echo "rabbitmq-server is not installed (apt-get install -y rabbitmq-server)" >&2; exit 3; }
	r=$work/rabbitmq
	mkdir -p "$r/mnesia" "$r/log"
	echo '[rabbitmq_management,rabbitmq_stream,rabbitmq_stream_management].' >"$r/enabled_plugins"
	# The metadata the node sends must name localhost:5552, the address
	# the suites expect (the host name is not reachable in the namespace).
	cat >"$r/rabbitmq.conf" <<-EOF
		stream.advertised_host = localhost
		stream.advertised_port = 5552
		log.console = false
		log.file.level = info
	EOF
	: >"$r/rabbitmq-env.conf"
	chown -R rabbitmq:rabbitmq "$r"
	;;
esac

rc=0
timeout -k 90 "$total_timeout" unshare --net -- bash "$self" --inner "$work" "$mode" "$spec_timeout" \
	>"$work/results.txt" 2>"$work/inner.err" &
inner_pid=$!
# Show results as they come, then wait for the namespace stage to end.
tail -n +1 -f --pid="$inner_pid" "$work/results.txt" 2>/dev/null || true
wait "$inner_pid" || rc=$?
cat "$work/inner.err" >&2
if [ "$rc" = 124 ]; then
	echo "the run was stopped after ${total_timeout}s (-total-timeout)" >&2
fi
awk '$1 == "PASS" { p++ } $1 == "FAIL" { f++ } $1 == "SKIP" { s++ }
	END { printf "passed %d, failed %d, skipped %d\n", p, f, s }' "$work/results.txt" | tee -a "$work/results.txt"
ran=$(grep -c '^\(PASS\|FAIL\|SKIP\) ' "$work/results.txt" || true)
want=$(wc -l <"$work/specs.tsv")
if [ "$ran" != "$want" ]; then
	echo "only $ran of $want specs have a result: the run ended early" | tee -a "$work/results.txt" >&2
	[ "$rc" != 0 ] || rc=1
fi
echo "($(($(date +%s) - start))s, client $version, broker $mode)"
[ -z "$out_file" ] || cp "$work/results.txt" "$out_file"
crc=0
if [ -n "$compare_file" ] && [ "$rc" = 0 ]; then
	# The specs that pass in the baseline and failed here, run once more.
	awk 'FNR == 1 { f++ } f == 1 && $1 == "PASS" { base[$2] = 1 } f == 2 && $1 == "FAIL" && ($2 in base) { print $2 }' \
		"$compare_file" "$work/results.txt" >"$work/again.txt"
	if [ -s "$work/again.txt" ]; then
		echo "--- running again once: $(tr '\n' ' ' <"$work/again.txt")"
		mv "$work/specs.tsv" "$work/specs.run.tsv"
		awk -F'\t' 'FNR == NR { again[$1] = 1; next } $1 in again' "$work/again.txt" "$work/specs.run.tsv" >"$work/specs.tsv"
		timeout -k 90 "$total_timeout" unshare --net -- bash "$self" --inner "$work" "$mode" "$spec_timeout" \
			>"$work/again.results.txt" 2>>"$work/inner.err" || true
		mv "$work/specs.run.tsv" "$work/specs.tsv"
		cat "$work/again.results.txt"
		# A spec that passed the second time replaces its failure, which
		# stays as a note.
		awk 'FNR == NR { if ($1 == "PASS") passed[$2] = 1; next }
			$1 ~ /^(PASS|FAIL|SKIP)$/ { skipping = ($1 == "FAIL" && ($2 in passed)) }
			skipping && $1 == "FAIL" { sub(/^FAIL/, "PASS"); print $0 " -- failed once, passed when run again"; next }
			skipping { print "    (first run) " substr($0, 5); next }
			{ print }' "$work/again.results.txt" "$work/results.txt" >"$work/results.merged.txt"
		mv "$work/results.merged.txt" "$work/results.txt"
		[ -z "$out_file" ] || cp "$work/results.txt" "$out_file"
	fi
	compare "$compare_file" "$work/results.txt" || crc=$?
elif [ -n "$compare_file" ]; then
	compare "$compare_file" "$work/results.txt" || crc=$?
fi
[ "$rc" = 0 ] || exit 3 # build, broker start, -total-timeout, ended early
exit "$crc"
