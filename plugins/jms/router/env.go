package router

import (
	"unsafe"

	"github.com/warrenmq/warren/plugins/jms/selector"
	"github.com/warrenmq/warren/sdk"
)

// headerEnv gives a selector a message's values: its headers, then, for
// the JMS header fields no header is named after, the AMQP properties
// that carry them. Strings are views of the route input, valid during
// Route only, which is as long as a selector looks at them.
//
// Each identifier of the exchange's selectors has a slot (SetSlots); a
// value looked up for the message is kept in its slot, stamped with the
// message's generation, so each header is found once per message however
// many selectors name it, and nothing needs clearing between messages.
type headerEnv struct {
	m    *sdk.Message
	gen  uint32
	gens []uint32 // per slot: the generation its value is from
	vals []selector.Value
}

// reset starts a message.
func (e *headerEnv) reset(m *sdk.Message) {
	e.m = m
	if e.gen++; e.gen == 0 { // wrapped: old stamps could match
		clear(e.gens)
		e.gen = 1
	}
}

// grow makes room for n slots.
func (e *headerEnv) grow(n int) {
	for len(e.gens) < n {
		e.gens = append(e.gens, 0)
		e.vals = append(e.vals, selector.Value{})
	}
}

func (e *headerEnv) Lookup(slot int, name string) selector.Value {
	if slot < 0 || slot >= len(e.gens) {
		return e.lookup(name)
	}
	if e.gens[slot] != e.gen {
		e.vals[slot] = e.lookup(name)
		e.gens[slot] = e.gen
	}
	return e.vals[slot]
}

// lookup converts a header to a selector value: booleans, integers of any
// width (and timestamps, as seconds), floats and decimals, strings and
// byte arrays (as strings). Void, tables and arrays read as NULL, as does
// an absent header.
func (e *headerEnv) lookup(name string) selector.Value {
	v, ok := e.m.Header(name)
	if !ok {
		return e.jmsField(name)
	}
	switch v.Kind() {
	case 't':
		b, _ := v.AsBool()
		return selector.BoolValue(b)
	case 'b', 'B', 's', 'u', 'I', 'i', 'l', 'T':
		if n, ok := v.AsInt(); ok {
			return selector.IntValue(n)
		}
	case 'f', 'd', 'D':
		f, _ := v.AsFloat()
		return selector.FloatValue(f)
	case 'S':
		s, _ := v.AsString()
		return selector.StringValue(s)
	case 'x':
		if b, _ := v.AsBytes(); len(b) > 0 {
			return selector.StringValue(unsafe.String(&b[0], len(b)))
		}
		return selector.StringValue("")
	}
	return selector.Value{}
}

// jmsField reads the JMS header fields from the AMQP properties, as the
// JMS client maps them (JMSTimestamp in milliseconds, the AMQP timestamp
// in seconds).
func (e *headerEnv) jmsField(name string) selector.Value {
	if len(name) < 4 || name[:3] != "JMS" {
		return selector.Value{}
	}
	str := func(s string, ok bool) selector.Value {
		if !ok {
			return selector.Value{}
		}
		return selector.StringValue(s)
	}
	m := e.m
	switch name {
	case "JMSMessageID":
		return str(m.MessageID())
	case "JMSCorrelationID":
		return str(m.CorrelationID())
	case "JMSType":
		return str(m.Type())
	case "JMSPriority":
		if _, ok := m.Property(sdk.PropPriority); ok {
			return selector.IntValue(int64(m.Priority()))
		}
	case "JMSDeliveryMode":
		if _, ok := m.Property(sdk.PropDeliveryMode); ok {
			if m.DeliveryMode() == 2 {
				return selector.StringValue("PERSISTENT")
			}
			return selector.StringValue("NON_PERSISTENT")
		}
	case "JMSTimestamp":
		if ts, ok := m.Timestamp(); ok {
			return selector.IntValue(ts * 1000)
		}
	}
	return selector.Value{}
}
