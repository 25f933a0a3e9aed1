package federation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/amqpclient"
	"github.com/warrenmq/warren/protocol"
)

// A queue link moves messages from the upstream's queue to the federated
// queue here while that queue has a consumer that waits (one of priority
// 0 or more, so not another broker's link) and no message ready: it
// consumes upstream at priority -1, so that the upstream's own consumers
// are served first, and cancels once the queue here has messages or no
// consumer. A message may so travel between brokers more than once (it
// goes where the consumers are); x-received-from counts its visits.

// queueLook is how often a queue link looks at its queue's consumers
// and depth, besides when the broker says its topology changed.
const queueLook = 100 * time.Millisecond

// queueSession runs one session of a queue link.
func (l *link) queueSession(ctx context.Context) error {
	st, ok := l.m.Downstream.Queue(l.spec.VHost, l.spec.Name)
	if !ok {
		return fmt.Errorf("queue '%s' in vhost '%s' not found", l.spec.Name, l.spec.VHost)
	}
	return l.session(ctx, func(e *ends) error { return l.queueLink(ctx, st, e) })
}

// queueLink is a queue link's session once both ends are open.
func (l *link) queueLink(ctx context.Context, st QueueState, e *ends) error {
	if caps, _ := e.up.Properties["capabilities"].(amqp.Table); caps["consumer_priorities"] != true {
		return errors.New("the upstream lacks consumer priorities")
	}
	upQ := or(l.spec.Queue, l.spec.Name)
	if onChannel(e.up, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclarePassive(upQ, st.Durable, st.AutoDelete, false, false, nil)
		return err
	}) != nil {
		if _, err := e.ch.QueueDeclare(upQ, st.Durable, st.AutoDelete, false, false, amqpclient.Table(st.Args)); err != nil {
			return fmt.Errorf("could not declare queue '%s' upstream: %w", upQ, err)
		}
	}
	l.setRunning(e)
	l.log.Info().Str("uri", e.uri.Redacted()).Msg("federation link running")

	entry := protocol.Table{"uri": e.uri.Redacted(), "queue": l.spec.Name}
	pending := map[uint64]uint64{}
	var deliveries <-chan amqp.Delivery
	consuming := false
	look := time.NewTicker(queueLook)
	defer look.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.restart:
			return errRestart
		case err := <-e.closed:
			return closedReason(err)
		case <-l.nudge:
		case <-look.C:
		case c, open := <-e.confirms:
			if !open {
				return errors.New("this broker's channel closed")
			}
			if err := l.confirmed(e, c, pending, func() { _ = e.ch.Cancel(l.spec.ConsumerTag, false) }, deliveries); err != nil {
				return err
			}
			continue
		case d, open := <-deliveries:
			if !open {
				deliveries = nil // cancelled: what was delivered is forwarded
				if consuming {
					return errors.New("the upstream cancelled the link's consumer")
				}
				continue
			}
			entry["redelivered"] = d.Redelivered
			headers := visited(amqpclient.FromClient(d.Headers), maps.Clone(entry), d.Exchange, d.RoutingKey)
			if err := l.forward(ctx, e, d, "", l.spec.Name, amqpclient.Table(headers), pending); err != nil {
				return err
			}
			continue
		}
		st, ok := l.m.Downstream.Queue(l.spec.VHost, l.spec.Name)
		if !ok {
			return fmt.Errorf("queue '%s' in vhost '%s' is gone", l.spec.Name, l.spec.VHost)
		}
		wants := st.Ready == 0 && st.Consumers > 0 && st.MaxPriority >= 0
		switch {
		case wants && !consuming && deliveries == nil:
			var err error
			deliveries, err = e.ch.Consume(upQ, l.spec.ConsumerTag, l.spec.AckMode == NoAck, false, false, false,
				amqp.Table{"x-priority": int32(-1)})
			if err != nil {
				return fmt.Errorf("could not consume from queue '%s' upstream: %w", upQ, err)
			}
			consuming = true
		case !wants && consuming:
			if err := e.ch.Cancel(l.spec.ConsumerTag, false); err != nil {
				return err
			}
			consuming = false
		}
	}
}

// visited is a message's headers as a queue link forwards it: the first
// time, its exchange and routing key kept as x-original-exchange and
// x-original-routing-key; this link's entry in x-received-from moved to
// the front with its visit-count one more; a CC header renamed
// x-original-cc (the message is published to the queue by name).
func visited(headers, entry protocol.Table, exchange, key string) protocol.Table {
	out := protocol.Table{}
	for k, v := range headers {
		if k == "CC" {
			k = "x-original-cc"
		}
		out[k] = v
	}
	var count int64
	if path, ok := headers[ReceivedFrom].([]any); ok {
		rest := make([]any, 0, len(path))
		for _, p := range path {
			if t, ok := p.(protocol.Table); ok && t["uri"] == entry["uri"] && t["queue"] == entry["queue"] {
				count = hopsCount(t)
				continue
			}
			rest = append(rest, p)
		}
		out[ReceivedFrom] = rest
	} else {
		out["x-original-exchange"], out["x-original-routing-key"] = exchange, key
		delete(out, ReceivedFrom)
	}
	entry["visit-count"] = count + 1
	return prepend(out, ReceivedFrom, entry)
}

func hopsCount(t protocol.Table) int64 {
	n, _ := t["visit-count"].(int64)
	return n
}
