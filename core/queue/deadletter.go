package queue

import (
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
)

// Dead letters as RabbitMQ writes them, whatever the queue's type: the
// message republished to the dead-letter exchange keeps its body and
// properties, and its x-death header records where it died and why.

// DeadLettered builds the message republished for d: the same body and
// properties, the expiration moved into x-death, x-death updated and the
// x-first-death-* headers set on the first death.
func DeadLettered(d Dead, queueName string, s Settings, now time.Time) (*message.Message, error) {
	old := d.Msg
	props, err := old.Properties()
	if err != nil {
		return nil, err
	}
	routingKey := old.RoutingKey
	headers := protocol.Table{}
	for k, v := range props.Headers {
		headers[k] = v
	}
	// x-death records the keys the message was published under, CC
	// included; a dead-letter routing key replaces them all, CC too.
	keys := []any{old.RoutingKey}
	cc, _ := old.SenderKeys()
	for _, k := range cc {
		keys = append(keys, k)
	}
	if s.HasDeadLetterKey {
		routingKey = s.DeadLetterRoutingKey
		delete(headers, "CC")
	}
	entry := protocol.Table{
		"reason":       string(d.Reason),
		"queue":        queueName,
		"time":         now.Truncate(time.Second).UTC(),
		"exchange":     old.Exchange,
		"routing-keys": keys,
		"count":        int64(1),
	}
	if props.Flags&protocol.FlagExpiration != 0 {
		entry["original-expiration"] = props.Expiration
		props.Expiration = ""
		props.Flags &^= protocol.FlagExpiration
	}
	deaths, _ := headers["x-death"].([]any)
	headers["x-death"] = recordDeath(deaths, entry)
	if _, ok := headers["x-first-death-reason"]; !ok {
		headers["x-first-death-reason"] = string(d.Reason)
		headers["x-first-death-queue"] = queueName
		headers["x-first-death-exchange"] = old.Exchange
	}
	props.Headers = headers
	props.Flags |= protocol.FlagHeaders
	return old.WithProperties(s.DeadLetterExchange, routingKey, &props)
}

// recordDeath puts entry at the front of x-death. An earlier death in the
// same queue for the same reason is counted in its record, which moves to
// the front, as RabbitMQ keeps x-death bounded.
func recordDeath(deaths []any, entry protocol.Table) []any {
	out := make([]any, 0, len(deaths)+1)
	for _, d := range deaths {
		t, ok := d.(protocol.Table)
		if ok && t["queue"] == entry["queue"] && t["reason"] == entry["reason"] {
			if n, ok := Integer(t["count"]); ok {
				entry["count"] = n + 1
			}
			if rk, ok := t["routing-keys"]; ok {
				entry["routing-keys"] = rk
			}
			if ex, ok := t["exchange"]; ok {
				entry["exchange"] = ex
			}
			continue
		}
		out = append(out, d)
	}
	return append([]any{entry}, out...)
}

// IsCycle says whether a dead letter whose x-death is deaths would reach
// queueName again without a rejection on the way: an automatic
// dead-letter cycle, which RabbitMQ breaks by dropping the message there.
func IsCycle(queueName string, deaths []any) bool {
	for _, d := range deaths {
		t, _ := d.(protocol.Table)
		if t["reason"] == string(Rejected) {
			return false
		}
		if t["queue"] == queueName {
			return true
		}
	}
	return false
}
