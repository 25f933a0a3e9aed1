package shovel

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/warrenmq/warren/core/amqpclient"
	"github.com/warrenmq/warren/core/paramcheck"
	"github.com/warrenmq/warren/protocol"
)

// Component is the runtime parameter component dynamic shovels are.
const Component = "shovel"

// AckMode is when the shovel acknowledges a message at its source.
type AckMode string

const (
	// OnConfirm acks the source once the destination confirmed the
	// message: nothing is lost if either end fails.
	OnConfirm AckMode = "on-confirm"
	// OnPublish acks the source once the message was handed to the
	// destination's socket.
	OnPublish AckMode = "on-publish"
	// NoAck consumes without acknowledgements.
	NoAck AckMode = "no-ack"
)

// Definition is a dynamic shovel as RabbitMQ 3.10.8's shovel plugin reads
// a runtime parameter's value (rabbit_shovel_parameters): AMQP 0-9-1 at
// both ends, with the pre-3.7 key names accepted beside the current ones.
type Definition struct {
	SrcURIs, DestURIs []string

	// The source: a queue, or an exchange that a server-named exclusive
	// queue is bound to with SrcExchangeKey.
	SrcQueue, SrcExchange, SrcExchangeKey string
	SrcQueueArgs, SrcConsumerArgs         protocol.Table
	SrcPrefetch                           int
	// DeleteAfter is how many messages the shovel moves before it deletes
	// itself: DeleteNever, DeleteQueueLength (the source queue's length
	// when it starts) or a count.
	DeleteAfter int64

	// The destination: DestQueue (declared if missing, published to
	// through the default exchange), or DestExchange and DestExchangeKey,
	// each of which, when not set, is the message's own.
	DestQueue                       string
	DestExchange, DestExchangeKey   *string
	DestQueueArgs                   protocol.Table
	AddForwardHeaders, AddTimestamp bool
	PublishProperties               protocol.Table

	AckMode        AckMode
	ReconnectDelay time.Duration
}

// The DeleteAfter values that are not counts.
const (
	DeleteNever       int64 = -1
	DeleteQueueLength int64 = -2
)

// defaultPrefetch and defaultReconnectDelay are RabbitMQ's.
const (
	defaultPrefetch       = 1000
	defaultReconnectDelay = time.Second
)

var (
	commonKeys = []paramcheck.Key{
		paramcheck.Optional("reconnect-delay", paramcheck.Number),
		paramcheck.Optional("ack-mode", paramcheck.OneOf("no-ack", "on-publish", "on-confirm")),
		paramcheck.Optional("src-protocol", paramcheck.OneOf("amqp10", "amqp091")),
		paramcheck.Optional("dest-protocol", paramcheck.OneOf("amqp10", "amqp091")),
	}
	srcKeys = []paramcheck.Key{
		paramcheck.Mandatory("src-uri", amqpclient.CheckURIs),
		paramcheck.Optional("src-exchange", paramcheck.String),
		paramcheck.Optional("src-exchange-key", paramcheck.String),
		paramcheck.Optional("src-queue", paramcheck.String),
		paramcheck.Optional("src-queue-args", paramcheck.Table),
		paramcheck.Optional("src-consumer-args", paramcheck.Table),
		paramcheck.Optional("prefetch-count", paramcheck.Number),
		paramcheck.Optional("src-prefetch-count", paramcheck.Number),
		paramcheck.Optional("delete-after", isDeleteAfter), // before 3.7
		paramcheck.Optional("src-delete-after", isDeleteAfter),
	}
	destKeys = []paramcheck.Key{
		paramcheck.Mandatory("dest-uri", amqpclient.CheckURIs),
		paramcheck.Optional("dest-exchange", paramcheck.String),
		paramcheck.Optional("dest-exchange-key", paramcheck.String),
		paramcheck.Optional("dest-queue", isQueueName),
		paramcheck.Optional("dest-queue-args", paramcheck.Table),
		paramcheck.Optional("add-forward-headers", paramcheck.Bool), // before 3.7
		paramcheck.Optional("add-timestamp-header", paramcheck.Bool),
		paramcheck.Optional("dest-add-forward-headers", paramcheck.Bool),
		paramcheck.Optional("dest-add-timestamp-header", paramcheck.Bool),
		paramcheck.Optional("publish-properties", isProperties),
		paramcheck.Optional("dest-publish-properties", isProperties),
	}
)

// Parse checks a shovel parameter's value as RabbitMQ does and reads it.
// Its errors are RabbitMQ's, one per line, each naming the key.
func Parse(v protocol.Table) (Definition, error) {
	var errs []string
	for _, p := range []string{"src-protocol", "dest-protocol"} {
		if s, _ := v[p].(string); s == "amqp10" {
			errs = append(errs, fmt.Sprintf("%s amqp10 is not supported: Warren's shovels speak AMQP 0-9-1 at both ends", p))
		}
	}
	if n := count(v, "src-exchange", "src-queue"); n == 0 {
		errs = append(errs, "Must specify 'src-exchange' or 'src-queue'")
	} else if n == 2 {
		errs = append(errs, "Cannot specify 'src-exchange' and 'src-queue'")
	}
	if count(v, "dest-exchange", "dest-queue") == 2 {
		errs = append(errs, "Cannot specify 'dest-exchange' and 'dest-queue'")
	}
	if _, isCount := deleteAfterOf(v); isCount && v["ack-mode"] == "no-ack" {
		errs = append(errs, "Cannot specify 'no-ack' and numerical 'delete-after'")
	}
	errs = append(errs, paramcheck.Proplist("shovel", slices.Concat(commonKeys, srcKeys, destKeys), v)...)
	if len(errs) > 0 {
		return Definition{}, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return read(v), nil
}

// read reads a checked value.
func read(v protocol.Table) Definition {
	d := Definition{
		SrcURIs: amqpclient.URIs(v["src-uri"]), DestURIs: amqpclient.URIs(v["dest-uri"]),
		SrcQueue: str(v, "src-queue"), SrcExchange: str(v, "src-exchange"), SrcExchangeKey: str(v, "src-exchange-key"),
		SrcQueueArgs: table(v, "src-queue-args"), SrcConsumerArgs: table(v, "src-consumer-args"),
		SrcPrefetch: defaultPrefetch,
		DestQueue:   str(v, "dest-queue"), DestQueueArgs: table(v, "dest-queue-args"),
		AckMode: OnConfirm, ReconnectDelay: defaultReconnectDelay,
	}
	for _, k := range []string{"prefetch-count", "src-prefetch-count"} {
		if n, ok := paramcheck.NumberOf(v[k]); ok {
			d.SrcPrefetch = int(max(0, min(n, math.MaxUint16)))
		}
	}
	d.DeleteAfter, _ = deleteAfterOf(v)
	if s, ok := v["dest-exchange"].(string); ok {
		d.DestExchange = &s
	}
	if s, ok := v["dest-exchange-key"].(string); ok {
		d.DestExchangeKey = &s
	}
	d.AddForwardHeaders = flag(v, "dest-add-forward-headers", flag(v, "add-forward-headers", false))
	d.AddTimestamp = flag(v, "dest-add-timestamp-header", flag(v, "add-timestamp-header", false))
	d.PublishProperties = table(v, "publish-properties")
	if p := table(v, "dest-publish-properties"); p != nil {
		d.PublishProperties = p
	}
	if s, ok := v["ack-mode"].(string); ok {
		d.AckMode = AckMode(s)
	}
	if n, ok := paramcheck.NumberOf(v["reconnect-delay"]); ok {
		d.ReconnectDelay = time.Duration(max(0, n) * float64(time.Second))
	}
	return d
}

// deleteAfterOf reads src-delete-after, or the pre-3.7 delete-after;
// isCount says whether it is a number.
func deleteAfterOf(v protocol.Table) (n int64, isCount bool) {
	x, ok := v["src-delete-after"]
	if !ok {
		x = v["delete-after"]
	}
	switch x := x.(type) {
	case string:
		if x == "queue-length" {
			return DeleteQueueLength, false
		}
	case int64:
		return x, true
	}
	return DeleteNever, false
}

func count(v protocol.Table, keys ...string) int {
	n := 0
	for _, k := range keys {
		if _, ok := v[k]; ok {
			n++
		}
	}
	return n
}

func str(v protocol.Table, k string) string { s, _ := v[k].(string); return s }

func flag(v protocol.Table, k string, or bool) bool {
	if b, ok := v[k].(bool); ok {
		return b
	}
	return or
}

func table(v protocol.Table, k string) protocol.Table {
	t, _ := v[k].(protocol.Table)
	return t
}

func isQueueName(name string, x any) error {
	if err := paramcheck.String(name, x); err != nil {
		return err
	}
	if s := x.(string); len(s) > 255 {
		return fmt.Errorf("%s should be less than 255 bytes, actually was %d", name, len(s))
	}
	return nil
}

func isDeleteAfter(name string, x any) error {
	switch x := x.(type) {
	case string:
		if x == "never" || x == "queue-length" {
			return nil
		}
	case int64:
		if x >= 0 {
			return nil
		}
	}
	return fmt.Errorf("%s should be a number greater than or equal to 0, \"never\" or \"queue-length\", actually was %s", name, paramcheck.Show(x))
}

// properties are the publish properties a destination may set, with
// whether each is a number.
var properties = map[string]bool{
	"content_type": false, "content_encoding": false, "delivery_mode": true, "priority": true,
	"correlation_id": false, "reply_to": false, "expiration": false, "message_id": false,
	"timestamp": true, "type": false, "user_id": false, "app_id": false, "cluster_id": false,
}

func isProperties(name string, x any) error {
	t, ok := x.(protocol.Table)
	if !ok {
		return fmt.Errorf("%s not a list %s", name, paramcheck.Show(x))
	}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		isNum, known := properties[k]
		switch {
		case !known:
			return fmt.Errorf("Unrecognised terms %s in %s", k, name)
		case isNum:
			if err := paramcheck.Number(k, t[k]); err != nil {
				return err
			}
		default:
			if err := paramcheck.String(k, t[k]); err != nil {
				return err
			}
		}
	}
	return nil
}
