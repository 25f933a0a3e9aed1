package shovel

import (
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/protocol"
)

func TestParseRefusesAsRabbitMQ(t *testing.T) {
	for _, tc := range []struct {
		value protocol.Table
		want  string
	}{
		{protocol.Table{"src-queue": "q"}, `Key "src-uri" not found in shovel`},
		{protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://"}, "Must specify 'src-exchange' or 'src-queue'"},
		{protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://", "src-queue": "q", "src-exchange": "x"}, "Cannot specify 'src-exchange' and 'src-queue'"},
		{protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://", "src-queue": "q", "dest-queue": "a", "dest-exchange": "x"}, "Cannot specify 'dest-exchange' and 'dest-queue'"},
		{protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://", "src-queue": "q", "ack-mode": "no-ack", "src-delete-after": int64(5)}, "Cannot specify 'no-ack' and numerical 'delete-after'"},
		{protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://", "src-queue": "q", "ack-mode": "sometimes"}, `ack-mode should be one of no-ack, on-publish, on-confirm, actually was "sometimes"`},
		{protocol.Table{"src-uri": "http://x", "dest-uri": "amqp://", "src-queue": "q"}, `"http://x" not a valid URI`},
		{protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://", "src-queue": "q", "src-prefetch-count": "ten"}, `src-prefetch-count should be a number, actually was "ten"`},
		{protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://", "src-queue": "q", "src-delete-after": int64(-1)}, "src-delete-after should be a number greater than or equal to 0"},
		{protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://", "src-queue": "q", "colour": "blue"}, "Unrecognised terms colour in shovel"},
		{protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://", "src-queue": "q", "dest-publish-properties": protocol.Table{"colour": "x"}}, "Unrecognised terms colour in dest-publish-properties"},
		{protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://", "src-queue": "q", "dest-publish-properties": protocol.Table{"delivery_mode": "2"}}, "delivery_mode should be a number"},
		{protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://", "src-queue": "q", "src-protocol": "amqp10"}, "src-protocol amqp10 is not supported"},
		{protocol.Table{"src-uri": []any{}, "dest-uri": "amqp://", "src-queue": "q"}, "src-uri should name at least one URI"},
		{protocol.Table{"src-uri": "amqp://:5672", "dest-uri": "amqp://", "src-queue": "q"}, "a port needs a host"},
		{protocol.Table{"src-uri": "amqp:///a/b", "dest-uri": "amqp://", "src-queue": "q"}, "invalid vhost"},
	} {
		_, err := Parse(tc.value)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v) = %v, want an error saying %q", tc.value, err, tc.want)
		}
	}
}

func TestParseReadsDefaultsAndLegacyKeys(t *testing.T) {
	d, err := Parse(protocol.Table{"src-uri": "amqp://", "dest-uri": []any{"amqp://u:p@h1/v", "amqp://u:p@h2/v"}, "src-queue": "q"})
	if err != nil {
		t.Fatal(err)
	}
	if d.AckMode != OnConfirm || d.SrcPrefetch != 1000 || d.ReconnectDelay != time.Second || d.DeleteAfter != DeleteNever ||
		len(d.DestURIs) != 2 || d.DestExchange != nil || d.DestExchangeKey != nil || d.AddForwardHeaders {
		t.Fatalf("defaults: %+v", d)
	}
	d, err = Parse(protocol.Table{"src-uri": "amqp://", "dest-uri": "amqp://", "src-exchange": "x", "src-exchange-key": "k",
		"prefetch-count": int64(10), "delete-after": "queue-length", "add-forward-headers": true, "publish-properties": protocol.Table{"delivery_mode": int64(2)},
		"dest-exchange": "", "reconnect-delay": 2.5, "ack-mode": "on-publish"})
	if err != nil {
		t.Fatal(err)
	}
	if d.SrcPrefetch != 10 || d.DeleteAfter != DeleteQueueLength || !d.AddForwardHeaders || d.PublishProperties["delivery_mode"] != int64(2) ||
		d.DestExchange == nil || *d.DestExchange != "" || d.ReconnectDelay != 2500*time.Millisecond || d.AckMode != OnPublish {
		t.Fatalf("legacy keys: %+v", d)
	}
}
