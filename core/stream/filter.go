package stream

import "github.com/warrenmq/warren/core/message"

// Filter is stream filtering as RabbitMQ 3.13 has it: a message's filter
// value (message.StreamFilterValue: a stream-protocol publisher's, or an
// AMQP 0-9-1 message's x-stream-filter-value header) is matched against
// the values a consumer asks for, and MatchUnfiltered asks for the
// messages without a value as well. The stream protocol applies it to a
// whole chunk (core/streamproto), an AMQP 0-9-1 consumer to each message
// (ConsumeFiltered).
type Filter struct {
	Values          map[string]bool
	MatchUnfiltered bool
}

// Wants reports whether m is one the filter asks for.
func (f *Filter) Wants(m *message.Message) bool {
	v := m.StreamFilterValue()
	if v == "" {
		return f.MatchUnfiltered
	}
	return f.Values[v]
}
