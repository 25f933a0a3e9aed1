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
	indexed    bool
	nIndexed   int
	index      [maxIndexed]indexedHeader
	rest       []byte // entries past the index, a table body
	headerBody []byte // the headers table's body the index points into
}

// maxIndexed is how many headers the index holds; messages rarely carry
// more, and those that do have the rest scanned as before.
const maxIndexed = 32

// indexedHeader locates one entry in the headers table's body: its name
// and its value (type octet first). Offsets, not views: storing slices
// and strings cost more than the decoding the index saves.
type indexedHeader struct {
	hash  uint32 // nameHash of the name: most misses cost one comparison
	name  uint32 // offset of the name's bytes
	value uint32 // offset of the value's type octet
	size  uint8  // the name's length
}

// FNV-1a, over header names, written out where it is used: in Go
// compiled to WebAssembly a call costs more than hashing a short name.
const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

// fixedSize is the size of a value of each fixed-size field type, type
// octet included; 0 for the others.
var fixedSize = [256]uint8{'V': 1, 't': 2, 'b': 2, 'B': 2, 's': 3, 'u': 3, 'I': 5, 'i': 5, 'f': 5, 'l': 9, 'd': 9, 'T': 9, 'D': 6}

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
	b := m.headerBody
	h := uint32(fnvOffset)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * fnvPrime
	}
	for i := range m.nIndexed {
		e := &m.index[i]
		if e.hash == h && int(e.size) == len(name) && string(b[e.name:e.name+uint32(e.size)]) == name {
			v, _ := readValue(b[e.value:])
			return v, true
		}
	}
	return getEntry(m.rest, name)
}

// indexHeaders fills the header index from the headers table.
func (m *Message) indexHeaders() {
	m.indexed, m.nIndexed, m.rest = true, 0, nil
	body := m.Headers().body()
	m.headerBody = body
	off := 0
	for off < len(body) {
		k := int(body[off])
		if off+1+k > len(body) {
			return
		}
		if m.nIndexed == maxIndexed {
			m.rest = body[off:]
			return
		}
		v := off + 1 + k // the value's type octet
		if v >= len(body) {
			return
		}
		var n int
		switch t := body[v]; t {
		case 'S', 'x', 'A', 'F':
			if v+5 > len(body) {
				return
			}
			n = 5 + int(binary.BigEndian.Uint32(body[v+1:]))
		default:
			n = int(fixedSize[t])
		}
		if n == 0 || n > len(body)-v {
			return
		}
		h := uint32(fnvOffset)
		for _, c := range body[off+1 : v] {
			h = (h ^ uint32(c)) * fnvPrime
		}
		m.index[m.nIndexed] = indexedHeader{hash: h, name: uint32(off + 1), value: uint32(v), size: uint8(k)}
		m.nIndexed++
		off = v + n
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
