package sdk

import (
	"encoding/binary"
)

// Message is the message being routed, as the broker received it: routing
// key, the raw AMQP property list and the body. Properties are decoded only
// when asked, the property list is scanned at most once per message, and
// nothing allocates.
//
// What a Message returns (strings, byte slices, Tables) is a view of the
// route input, valid until Route returns: copy (strings.Clone) what you
// keep. The headers and properties are present only when the plugin
// declares FeatureHeaders or FeatureProperties, the body only with
// FeatureBody; otherwise they read as absent.
type Message struct {
	key   string
	flags uint16
	props []byte
	body  []byte

	scanned bool
	offs    [numProps]int32 // offset of each present property in props, -1 when absent

	// The header index: the first Header call reads the headers table
	// once and keeps its first maxIndexed entries here, so later calls
	// compare names only instead of decoding every entry before the one
	// asked for (each decode is a function call, dear in WebAssembly).
	// rest is what the index does not cover, scanned on a miss.
	indexed  bool
	nIndexed int
	index    [maxIndexed]indexedHeader
	rest     []byte // entries past the index, a table body
}

// maxIndexed is how many headers the index holds; messages rarely carry
// more, and those that do have the rest scanned as before.
const maxIndexed = 32

type indexedHeader struct {
	name  string // a view of the route input
	value Value
}

// The basic class's properties, in wire order; Property takes these.
const (
	PropContentType = iota
	PropContentEncoding
	propHeaders
	PropDeliveryMode
	PropPriority
	PropCorrelationID
	PropReplyTo
	PropExpiration
	PropMessageID
	PropTimestamp
	PropType
	PropUserID
	PropAppID
	PropClusterID
	numProps
)

// propFlag is the flag bit announcing property i.
func propFlag(i int) uint16 { return 0x8000 >> i }

// RawMessage builds a Message from the parts the broker passes: routing
// key, property flags, raw property list and body. Tests use it for
// messages MakeMessage cannot express.
func RawMessage(routingKey string, flags uint16, props, body []byte) *Message {
	return &Message{key: routingKey, flags: flags, props: props, body: body}
}

// Reset makes m another message, as RawMessage would, without allocating.
func (m *Message) Reset(key string, flags uint16, props, body []byte) {
	m.key, m.flags, m.props, m.body = key, flags, props, body
	m.scanned, m.indexed = false, false
}

// RoutingKey is the key the message was published with.
func (m *Message) RoutingKey() string { return m.key }

// Body is the message body (FeatureBody).
func (m *Message) Body() []byte { return m.body }

// Flags is the property flags word as received.
func (m *Message) Flags() uint16 { return m.flags }

// RawProperties is the property list as received.
func (m *Message) RawProperties() []byte { return m.props }

// scan records where each property starts. A list that does not decode
// (the broker validated it, so only a foreign field type could) ends the
// scan: the properties after the fault read as absent.
func (m *Message) scan() {
	m.scanned = true
	off := 0
	p := m.props
	for i := range numProps {
		m.offs[i] = -1
		if m.flags&propFlag(i) == 0 {
			continue
		}
		start := off
		switch i {
		case propHeaders:
			if len(p)-off < 4 {
				off = -1
				break
			}
			n := binary.BigEndian.Uint32(p[off:])
			if uint64(n) > uint64(len(p)-off-4) {
				off = -1
				break
			}
			off += 4 + int(n)
		case PropDeliveryMode, PropPriority:
			off++
		case PropTimestamp:
			off += 8
		default: // short strings
			if off >= len(p) {
				off = -1
				break
			}
			off += 1 + int(p[off])
		}
		if off < 0 || off > len(p) {
			for j := i; j < numProps; j++ {
				m.offs[j] = -1
			}
			return
		}
		m.offs[i] = int32(start)
	}
}

// Property returns one property (one of the Prop constants) as a Value:
// short strings as 'S', delivery-mode and priority as 'B', the timestamp
// as 'T', the headers as 'F'.
func (m *Message) Property(i int) (Value, bool) {
	if i < 0 || i >= numProps || m.flags&propFlag(i) == 0 {
		return Value{}, false
	}
	if !m.scanned {
		m.scan()
	}
	off := m.offs[i]
	if off < 0 {
		return Value{}, false
	}
	p := m.props[off:]
	switch i {
	case propHeaders:
		n := binary.BigEndian.Uint32(p)
		return Value{kind: 'F', data: p[: 4+n : 4+n]}, true
	case PropDeliveryMode, PropPriority:
		return Value{kind: 'B', data: p[:1:1]}, true
	case PropTimestamp:
		return Value{kind: 'T', data: p[:8:8]}, true
	}
	n := int(p[0])
	return Value{kind: 'S', data: p[1 : 1+n : 1+n]}, true
}

func (m *Message) str(i int) (string, bool) {
	v, ok := m.Property(i)
	if !ok {
		return "", false
	}
	return v.AsString()
}

// Headers is the headers table; not Valid when the message has none.
func (m *Message) Headers() Table {
	v, ok := m.Property(propHeaders)
	if !ok {
		return Table{}
	}
	t, _ := v.AsTable()
	return t
}

// Header returns one header (the first of that name). The first call on a
// message indexes its headers in one pass; later calls cost a comparison
// of names per header, so reading several headers costs little more than
// reading one.
func (m *Message) Header(name string) (Value, bool) {
	if !m.indexed {
		m.indexHeaders()
	}
	for i := range m.nIndexed {
		if e := &m.index[i]; e.name == name {
			return e.value, true
		}
	}
	return getEntry(m.rest, name)
}

// indexHeaders fills the header index from the headers table.
func (m *Message) indexHeaders() {
	m.indexed, m.nIndexed, m.rest = true, 0, nil
	b := m.Headers().body()
	for len(b) > 0 {
		k := int(b[0])
		if 1+k > len(b) {
			return
		}
		if m.nIndexed == maxIndexed {
			m.rest = b
			return
		}
		v, n := readValue(b[1+k:])
		if n == 0 {
			return
		}
		m.index[m.nIndexed] = indexedHeader{name: view(b[1 : 1+k]), value: v}
		m.nIndexed++
		b = b[1+k+n:]
	}
}

func (m *Message) ContentType() (string, bool)     { return m.str(PropContentType) }
func (m *Message) ContentEncoding() (string, bool) { return m.str(PropContentEncoding) }
func (m *Message) CorrelationID() (string, bool)   { return m.str(PropCorrelationID) }
func (m *Message) ReplyTo() (string, bool)         { return m.str(PropReplyTo) }
func (m *Message) Expiration() (string, bool)      { return m.str(PropExpiration) }
func (m *Message) MessageID() (string, bool)       { return m.str(PropMessageID) }
func (m *Message) Type() (string, bool)            { return m.str(PropType) }
func (m *Message) UserID() (string, bool)          { return m.str(PropUserID) }
func (m *Message) AppID() (string, bool)           { return m.str(PropAppID) }

// DeliveryMode is 2 for persistent messages, 1 or 0 otherwise.
func (m *Message) DeliveryMode() uint8 {
	v, ok := m.Property(PropDeliveryMode)
	if !ok {
		return 0
	}
	return v.data[0]
}

// Priority is the message priority, 0 when absent.
func (m *Message) Priority() uint8 {
	v, ok := m.Property(PropPriority)
	if !ok {
		return 0
	}
	return v.data[0]
}

// Timestamp is the timestamp property in seconds since the Unix epoch.
func (m *Message) Timestamp() (int64, bool) {
	v, ok := m.Property(PropTimestamp)
	if !ok {
		return 0, false
	}
	return v.AsInt()
}
