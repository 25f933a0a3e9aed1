package queue

import (
	"math"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// TestCheckDeclareArgs has one row per argument value RabbitMQ 3.10.8
// refuses or takes, with its answer as it gave it for a queue 'q' in
// vhost '/' (checked with amqp091-go against the reference node), and
// the rows where Warren answers otherwise, marked.
func TestCheckDeclareArgs(t *testing.T) {
	const in = "PRECONDITION_FAILED - invalid arg '"
	const q = "' for queue 'q' in vhost '/'"
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		typ  string // x-queue-type, "" for none
		key  string
		val  any
		want string // "" when taken
	}{
		// Classic queues.
		{"", "x-message-ttl", int32(-1), in + "x-message-ttl" + q + ": {value_negative,-1}"},
		{"", "x-message-ttl", 1.5, in + "x-message-ttl" + q + `: "expected integer, got double"`},
		{"", "x-message-ttl", float32(5), in + "x-message-ttl" + q + `: "expected integer, got float"`},
		{"", "x-message-ttl", int64(1) << 62, in + "x-message-ttl" + q + ": {value_too_large,4611686018427387904}"},
		{"", "x-message-ttl", "10", in + "x-message-ttl" + q + `: "expected integer, got longstr"`},
		{"", "x-message-ttl", nan, in + "x-message-ttl" + q + `: "expected integer, got double"`}, // RabbitMQ drops the connection
		{"", "x-message-ttl", int8(0), ""},
		{"", "x-expires", int32(0), in + "x-expires" + q + ": {value_zero,0}"},
		{"", "x-expires", int32(-5), in + "x-expires" + q + ": {value_negative,-5}"},
		{"", "x-expires", inf, in + "x-expires" + q + `: "expected integer, got double"`}, // RabbitMQ drops the connection
		{"", "x-max-length", int32(-1), in + "x-max-length" + q + ": {value_negative,-1}"},
		{"", "x-max-length", int8(-1), in + "x-max-length" + q + ": {value_negative,-1}"},
		{"", "x-max-length", int64(1) << 62, ""},
		{"", "x-max-length", nan, in + "x-max-length" + q + `: "expected integer, got double"`}, // RabbitMQ drops the connection
		{"", "x-max-length-bytes", int32(-1), in + "x-max-length-bytes" + q + ": {value_negative,-1}"},
		{"", "x-overflow", "bogus", in + "x-overflow" + q + ": invalid_overflow"},
		{"", "x-overflow", int32(1), in + "x-overflow" + q + ": {unacceptable_type,signedint}"},
		{"", "x-max-priority", int32(-1), in + "x-max-priority" + q + ": {value_negative,-1}"},
		{"", "x-max-priority", int32(256), in + "x-max-priority" + q + ": {max_value_exceeded,256}"},
		{"", "x-max-priority", int32(0), ""},
		{"", "x-max-priority", 1.0, in + "x-max-priority" + q + `: "expected integer, got double"`},
		{"", "x-single-active-consumer", "yes", in + "x-single-active-consumer" + q + ": {unacceptable_type,longstr}"},
		{"", "x-single-active-consumer", int32(1), in + "x-single-active-consumer" + q + ": {unacceptable_type,signedint}"},
		{"", "x-queue-mode", "bogus", in + "x-queue-mode" + q + `: "unsupported queue mode 'bogus'"`},
		{"", "x-queue-mode", int32(1), in + "x-queue-mode" + q + ": {unacceptable_type,signedint}"},
		{"", "x-queue-type", "bogus", in + "x-queue-type" + q + `: "unsupported queue type 'bogus'"`},
		{"", "x-queue-type", int32(5), in + "x-queue-type" + q + ": {unacceptable_type,signedint}"},
		{"", "x-queue-version", int32(3), in + "x-queue-version" + q + `: "unsupported queue version '3'"`},
		{"", "x-queue-version", int32(0), in + "x-queue-version" + q + `: "unsupported queue version '0'"`},
		{"", "x-queue-version", int32(2), ""},
		{"", "x-queue-version", "1", in + "x-queue-version" + q + `: "expected integer, got longstr"`},
		{"", "x-dead-letter-exchange", int32(5), "PRECONDITION_FAILED - invalid type 'signedint' for arg 'x-dead-letter-exchange' in queue 'q' in vhost '/'"},
		{"", "x-dead-letter-routing-key", "k", in + "x-dead-letter-routing-key" + q + ": routing_key_but_no_dlx_defined"},
		{"", "x-max-in-memory-length", int32(-1), in + "x-max-in-memory-length" + q + " of queue type rabbit_classic_queue"},
		{"", "x-max-age", "0s", in + "x-max-age" + q + " of queue type rabbit_classic_queue"},
		{"", "x-initial-cluster-size", int32(-1), in + "x-initial-cluster-size" + q + " of queue type rabbit_classic_queue"},
		{"", "x-queue-leader-locator", "bogus", in + "x-queue-leader-locator" + q + " of queue type rabbit_classic_queue"},
		{"", "x-quorum-initial-group-size", int32(-1), in + "x-quorum-initial-group-size" + q + " of queue type rabbit_classic_queue"},
		{"", "x-dead-letter-strategy", "bogus", in + "x-dead-letter-strategy" + q + " of queue type rabbit_classic_queue"},
		{"", "x-stream-max-segment-size-bytes", int64(1) << 62, in + "x-stream-max-segment-size-bytes" + q + " of queue type rabbit_classic_queue"},
		// Warren's own: RabbitMQ refuses x-delivery-limit for a classic queue.
		{"", "x-delivery-limit", int32(0), ""},
		{"", "x-delivery-limit", int32(-1), in + "x-delivery-limit" + q + ": {value_negative,-1}"},
		{"", "x-unknown", nan, ""}, // kept and ignored

		// Quorum queues.
		{"quorum", "x-quorum-initial-group-size", int32(-1), in + "x-quorum-initial-group-size" + q + ": {value_negative,-1}"},
		{"quorum", "x-quorum-initial-group-size", int32(0), in + "x-quorum-initial-group-size" + q + ": {value_zero,0}"},
		{"quorum", "x-quorum-initial-group-size", 1.5, in + "x-quorum-initial-group-size" + q + `: "expected integer, got double"`},
		{"quorum", "x-quorum-initial-group-size", int64(1) << 40, ""},
		{"quorum", "x-queue-leader-locator", "bogus", in + "x-queue-leader-locator" + q + ": invalid_queue_locator_arg"},
		{"quorum", "x-queue-leader-locator", int32(5), in + "x-queue-leader-locator" + q + ": {unacceptable_type,signedint}"},
		{"quorum", "x-queue-leader-locator", "least-leaders", ""},
		{"quorum", "x-max-in-memory-length", int32(-1), in + "x-max-in-memory-length" + q + ": {value_negative,-1}"},
		{"quorum", "x-max-in-memory-bytes", int32(-1), in + "x-max-in-memory-bytes" + q + ": {value_negative,-1}"},
		{"quorum", "x-max-in-memory-length", 1.5, in + "x-max-in-memory-length" + q + `: "expected integer, got double"`},
		{"quorum", "x-max-length", int32(-1), in + "x-max-length" + q + ": {value_negative,-1}"},
		{"quorum", "x-expires", int32(0), in + "x-expires" + q + ": {value_zero,0}"},
		{"quorum", "x-overflow", "reject-publish-dlx", ""},
		{"quorum", "x-dead-letter-strategy", "bogus", in + "x-dead-letter-strategy" + q + ": invalid_dlx_strategy"},
		{"quorum", "x-dead-letter-strategy", int32(5), in + "x-dead-letter-strategy" + q + ": {unacceptable_type,signedint}"},
		{"quorum", "x-single-active-consumer", "yes", in + "x-single-active-consumer" + q + ": {unacceptable_type,longstr}"},
		{"quorum", "x-queue-master-locator", "bogus", in + "x-queue-master-locator" + q + " of queue type rabbit_quorum_queue"},
		// Any value (ParseArgs reads it as TestQuorumDeliveryLimit says).
		{"quorum", "x-delivery-limit", int32(-1), ""},
		{"quorum", "x-delivery-limit", 1.5, ""},
		{"quorum", "x-delivery-limit", "abc", ""},
		{"quorum", "x-delivery-limit", true, ""},
		{"quorum", "x-delivery-limit", int32(0), ""},

		// Streams.
		{"stream", "x-max-age", "0s", in + "x-max-age" + q + ": invalid_max_age"},
		{"stream", "x-max-age", "0D", in + "x-max-age" + q + ": invalid_max_age"},
		{"stream", "x-max-age", "1.5h", in + "x-max-age" + q + ": invalid_max_age"},
		{"stream", "x-max-age", "1 h", in + "x-max-age" + q + ": invalid_max_age"},
		{"stream", "x-max-age", "1H", in + "x-max-age" + q + ": invalid_max_age"},
		{"stream", "x-max-age", "1ms", in + "x-max-age" + q + ": invalid_max_age"},
		{"stream", "x-max-age", int32(5), in + "x-max-age" + q + ": {unacceptable_type,signedint}"},
		{"stream", "x-max-age", "-1h", in + "x-max-age" + q + ": invalid_max_age"}, // RabbitMQ: 541
		{"stream", "x-max-age", "h", in + "x-max-age" + q + ": invalid_max_age"},   // RabbitMQ: 541
		{"stream", "x-max-age", "", in + "x-max-age" + q + ": invalid_max_age"},    // RabbitMQ: 541
		{"stream", "x-max-age", "99999999999Y", ""},
		{"stream", "x-max-age", "4294967296s", ""},
		{"stream", "x-max-age", "01h", ""},
		{"stream", "x-stream-max-segment-size-bytes", int64(1) << 62, "PRECONDITION_FAILED - Exceeded max value for x-stream-max-segment-size-bytes"},
		{"stream", "x-stream-max-segment-size-bytes", int64(4294967296), "PRECONDITION_FAILED - Exceeded max value for x-stream-max-segment-size-bytes"},
		{"stream", "x-stream-max-segment-size-bytes", int64(3000000000), ""},
		{"stream", "x-stream-max-segment-size-bytes", int32(0), ""},
		{"stream", "x-stream-max-segment-size-bytes", int32(-1), in + "x-stream-max-segment-size-bytes" + q + ": {value_negative,-1}"},
		{"stream", "x-stream-max-segment-size-bytes", 1.5, in + "x-stream-max-segment-size-bytes" + q + `: "expected integer, got double"`},
		{"stream", "x-max-length-bytes", int32(-1), in + "x-max-length-bytes" + q + ": {value_negative,-1}"},
		{"stream", "x-max-length-bytes", int64(1) << 62, ""},
		{"stream", "x-initial-cluster-size", int32(-1), in + "x-initial-cluster-size" + q + ": {value_negative,-1}"},
		{"stream", "x-initial-cluster-size", int32(0), in + "x-initial-cluster-size" + q + ": {value_zero,0}"},
		{"stream", "x-initial-cluster-size", "a", in + "x-initial-cluster-size" + q + `: "expected integer, got longstr"`},
		{"stream", "x-initial-cluster-size", 1.5, in + "x-initial-cluster-size" + q + `: "expected integer, got double"`},
		{"stream", "x-initial-cluster-size", int64(1) << 40, ""},
		{"stream", "x-queue-leader-locator", "bogus", in + "x-queue-leader-locator" + q + ": invalid_queue_locator_arg"},
		{"stream", "x-queue-leader-locator", "balanced", ""},
		{"stream", "x-queue-leader-locator", int32(5), in + "x-queue-leader-locator" + q + ": {unacceptable_type,signedint}"},
		{"stream", "x-max-length", int32(5), in + "x-max-length" + q + " of queue type rabbit_stream_queue"},
		{"stream", "x-priority", int32(5), ""}, // a consumer's argument: not a queue's, kept
	} {
		args := protocol.Table{tc.key: tc.val}
		if tc.typ != "" && tc.key != "x-queue-type" {
			args["x-queue-type"] = tc.typ
		}
		err := CheckDeclareArgs("q", "/", args)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s %s=%v: %v, want it taken", tc.typ, tc.key, tc.val, err)
			}
			continue
		}
		if e := reply.As(err); err == nil || e.Code != protocol.PreconditionFailed || e.Text != tc.want {
			t.Errorf("%s %s=%v:\n got %v\nwant 406 %s", tc.typ, tc.key, tc.val, err, tc.want)
		}
	}
}

// When several arguments are bad, RabbitMQ names the first in its own
// order of checks, whatever the table's.
func TestCheckDeclareArgsOrder(t *testing.T) {
	err := CheckDeclareArgs("q", "/", protocol.Table{"x-max-priority": int32(-1), "x-expires": int32(0), "x-max-age": "1h"})
	if e := reply.As(err); err == nil || e.Text != "PRECONDITION_FAILED - invalid arg 'x-expires' for queue 'q' in vhost '/': {value_zero,0}" {
		t.Fatalf("got %v", err)
	}
	// Values are checked before another type's arguments are refused.
	err = CheckDeclareArgs("q", "/", protocol.Table{"x-max-age": "1h", "x-max-length": int32(-2)})
	if e := reply.As(err); err == nil || e.Text != "PRECONDITION_FAILED - invalid arg 'x-max-length' for queue 'q' in vhost '/': {value_negative,-2}" {
		t.Fatalf("got %v", err)
	}
}

// TestCheckConsumeArgs is basic.consume's arguments on each type, with
// RabbitMQ 3.10.8's answers for a queue 'q' in vhost '/'.
func TestCheckConsumeArgs(t *testing.T) {
	const in = "PRECONDITION_FAILED - invalid arg '"
	const q = "' for queue 'q' in vhost '/'"
	for _, tc := range []struct {
		typ  string
		key  string
		val  any
		want string
	}{
		{Classic, "x-priority", 1.5, in + "x-priority" + q + `: "expected integer, got double"`},
		{Classic, "x-priority", "a", in + "x-priority" + q + `: "expected integer, got longstr"`},
		{Classic, "x-priority", true, in + "x-priority" + q + `: "expected integer, got bool"`},
		{Classic, "x-priority", math.NaN(), in + "x-priority" + q + `: "expected integer, got double"`}, // RabbitMQ drops the connection
		{Classic, "x-priority", int64(1) << 40, ""},
		{Classic, "x-priority", int8(-3), ""},
		{Classic, "x-cancel-on-ha-failover", "yes", in + "x-cancel-on-ha-failover" + q + ": {unacceptable_type,longstr}"},
		{Classic, "x-cancel-on-ha-failover", int32(1), in + "x-cancel-on-ha-failover" + q + ": {unacceptable_type,signedint}"},
		{Classic, "x-cancel-on-ha-failover", true, ""},
		{Classic, "x-stream-offset", "first", in + "x-stream-offset" + q + " of queue type rabbit_classic_queue"},
		{Classic, "x-bogus", int32(1), ""},
		{Quorum, "x-priority", 1.5, in + "x-priority" + q + `: "expected integer, got double"`},
		{Quorum, "x-priority", int64(-1) << 40, ""},
		{Quorum, "x-cancel-on-ha-failover", true, in + "x-cancel-on-ha-failover" + q + " of queue type rabbit_quorum_queue"},
		{Quorum, "x-stream-offset", int32(-1), in + "x-stream-offset" + q + " of queue type rabbit_quorum_queue"},
		{Stream, "x-priority", int8(-3), in + "x-priority" + q + " of queue type rabbit_stream_queue"},
		{Stream, "x-priority", 1.5, in + "x-priority" + q + " of queue type rabbit_stream_queue"},
		{Stream, "x-cancel-on-ha-failover", true, in + "x-cancel-on-ha-failover" + q + " of queue type rabbit_stream_queue"},
		{Stream, "x-stream-offset", "0s", in + "x-stream-offset" + q + `: {invalid_stream_offset_arg,{longstr,<<"0s">>}}`},
		{Stream, "x-stream-offset", "1ms", in + "x-stream-offset" + q + `: {invalid_stream_offset_arg,{longstr,<<"1ms">>}}`},
		{Stream, "x-stream-offset", "h", in + "x-stream-offset" + q + `: {invalid_stream_offset_arg,{longstr,<<"h">>}}`}, // RabbitMQ: 541
		{Stream, "x-stream-offset", "first", ""},
		{Stream, "x-stream-offset", "1h", ""},
		{Stream, "x-stream-offset", "99999999999Y", ""},
		{Stream, "x-stream-offset", int32(-1), ""},
		{Stream, "x-stream-offset", time.Unix(1000, 0), ""},
		{Stream, "x-credit", "bogus", ""},
	} {
		err := CheckConsumeArgs("q", "/", tc.typ, protocol.Table{tc.key: tc.val})
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s %s=%v: %v, want it taken", tc.typ, tc.key, tc.val, err)
			}
			continue
		}
		if e := reply.As(err); err == nil || e.Code != protocol.PreconditionFailed || e.Text != tc.want {
			t.Errorf("%s %s=%v:\n got %v\nwant 406 %s", tc.typ, tc.key, tc.val, err, tc.want)
		}
	}
}

func TestParseInterval(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1h", time.Hour, true},
		{"01h", time.Hour, true},
		{"7D", 7 * 24 * time.Hour, true},
		{"2M", 60 * 24 * time.Hour, true},
		{"0s", 0, true}, // read as no limit; the checks refuse it
		{"99999999999Y", math.MaxInt64, true},
		{"2147483648Y", math.MaxInt64, true}, // overflowed to a negative age before
		{"9223372036s", 9223372036 * time.Second, true},
		{"9223372037s", math.MaxInt64, true},
		{"h", 0, false},
		{"", 0, false},
		{"-1h", 0, false},
		{"1.5h", 0, false},
		{"1H", 0, false},
		{"1ms", 0, false},
	} {
		got, ok := ParseInterval(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseInterval(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
