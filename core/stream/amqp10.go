package stream

import (
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol/amqp10"
)

// forAMQP091 is m as an AMQP 0-9-1 consumer reads it: an AMQP 1.0
// message the stream protocol published (message.FlagAMQP10) converted
// as RabbitMQ converts it (protocol/amqp10), any other m itself. A
// client's bytes that do not parse as AMQP 1.0 are delivered as the body,
// with no properties, rather than lost to the reader.
func forAMQP091(m *message.Message) *message.Message {
	if !m.IsAMQP10() {
		return m
	}
	raw := func() *message.Message {
		out, _ := message.New("", m.RoutingKey, 0, nil, m.Body)
		return out
	}
	am, err := amqp10.Parse(m.Body)
	if err != nil {
		return raw()
	}
	p, body := am.ToAMQP091()
	props, err := p.Append(nil)
	if err != nil {
		return raw()
	}
	exchange, routingKey := am.Routing(m.RoutingKey)
	out, err := message.New(exchange, routingKey, p.Flags, props, body)
	if err != nil {
		return raw()
	}
	return out
}
