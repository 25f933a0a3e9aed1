#!/usr/bin/env bash
# Runs the integration suite that ships in github.com/rabbitmq/amqp091-go
# against a freshly started Warren and prints one line per test.
#
#   tests/integration/amqp091-suite.sh [-v VERSION] [-url AMQP_URL]
#
# Without -url it builds and starts Warren on a free loopback port with a
# fresh data directory. With -url it runs against whatever broker is there
# (RabbitMQ, say) so the two can be compared test by test.
#
# Each test runs in its own `go test` process: most of the suite's tests
# leave connections behind when the broker is not RabbitMQ, which would trip
# the suite's goroutine-leak check for the whole package.
set -euo pipefail

version=v1.10.0
url=""
while [ $# -gt 0 ]; do
	case "$1" in
	-v) version=$2; shift 2 ;;
	-url) url=$2; shift 2 ;;
	*) echo "usage: $0 [-v VERSION] [-url AMQP_URL]" >&2; exit 2 ;;
	esac
done

root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

# The module, copied out of the module cache so it can be built in place.
mod=$(cd "$root" && go mod download -json "github.com/rabbitmq/amqp091-go@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
cp -r "$mod" "$work/suite" && chmod -R u+w "$work/suite"

if [ -z "$url" ]; then
	(cd "$root" && go build -o "$work/warren" ./cmd/warren)
	# Port 0: the kernel picks a free port, which the JSON log reports.
	"$work/warren" -listen 127.0.0.1:0 -data "$work/data" >"$work/warren.log" 2>&1 &
	pid=$!
	addr=""
	for _ in $(seq 100); do
		addr=$(sed -n 's/.*"listener":"amqp","addr":"\([^"]*\)".*/\1/p' "$work/warren.log" | head -1)
		[ -n "$addr" ] && break
		sleep 0.1
	done
	[ -n "$addr" ] || { echo "warren did not start:" >&2; cat "$work/warren.log" >&2; exit 1; }
	url="amqp://guest:guest@$addr/"
fi

cd "$work/suite"
go test -tags integration -c -o "$work/suite.test" . >/dev/null
tests=$(grep -ho '^func Test[A-Za-z0-9_]*(t ' integration_test.go | sed 's/^func //; s/(t $//')
pass=0 fail=0 skip=0
for t in $tests; do
	out=$(AMQP_URL="$url" timeout 120 "$work/suite.test" -test.run "^${t}\$" -test.v -test.count=1 2>&1 || true)
	if grep -q -- "^--- PASS: $t " <<<"$out"; then
		echo "PASS $t"; pass=$((pass + 1))
	elif grep -q -- "^--- SKIP: $t " <<<"$out"; then
		echo "SKIP $t"; skip=$((skip + 1))
	else
		echo "FAIL $t"; fail=$((fail + 1))
		sed 's/^/    /' <<<"$out" | grep -v '^    === ' | head -20
	fi
done
echo "passed $pass, failed $fail, skipped $skip"
